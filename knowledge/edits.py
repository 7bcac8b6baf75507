"""Line-precise edit ops and unified diffs (pure, no ORM).

Ops apply in order, each to the result of the previous one, on LF-normalised lines numbered
from 1 (the line model of `knowledge.structure`). Guards make an edit fail instead of landing
in the wrong place: `expected_text` / `expected_md5` compare the existing lines joined with LF,
`expected_neighbor_text` the line an insert is anchored to, and `expected_count` the exact
number of literal matches. Any failure rejects the whole list, so a call is all or nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from config.exceptions import Invalid
from knowledge.structure import join_document, lines_md5, normalise_newlines, split_document, split_fragment

DIFF_CONTEXT = 3
OP_TYPES = ("replace_line_range", "insert_at_line", "delete_line_range", "replace_literal")


class EditFailed(Invalid):
    """An op did not apply; the message names the op by its index in `ops`."""

    code = "edit_failed"

    def __init__(self, index: int, op_type: str, reason: str) -> None:
        super().__init__(f"ops[{index}] ({op_type}): {reason}", op_index=index, op_type=op_type)


@dataclass(frozen=True)
class ReplaceLineRange:
    start_line: int
    end_line: int
    replacement: str
    expected_text: str | None = None
    expected_md5: str | None = None
    type: Literal["replace_line_range"] = "replace_line_range"


@dataclass(frozen=True)
class InsertAtLine:
    line: int
    content: str
    position: Literal["before", "after"] = "before"
    expected_neighbor_text: str | None = None
    type: Literal["insert_at_line"] = "insert_at_line"


@dataclass(frozen=True)
class DeleteLineRange:
    start_line: int
    end_line: int
    expected_text: str | None = None
    expected_md5: str | None = None
    type: Literal["delete_line_range"] = "delete_line_range"


@dataclass(frozen=True)
class ReplaceLiteral:
    find: str
    replace: str
    expected_count: int
    type: Literal["replace_literal"] = "replace_literal"


EditOp = ReplaceLineRange | InsertAtLine | DeleteLineRange | ReplaceLiteral
_OP_CLASSES: dict[str, type[EditOp]] = {
    "replace_line_range": ReplaceLineRange,
    "insert_at_line": InsertAtLine,
    "delete_line_range": DeleteLineRange,
    "replace_literal": ReplaceLiteral,
}


def op_from_dict(data: Mapping[str, Any]) -> EditOp:
    """Build an op from validated input (the API serializers check types and bounds)."""
    fields = dict(data)
    return _OP_CLASSES[fields.pop("type")](**fields)


@dataclass(frozen=True)
class ChangedRange:
    """Changed lines in the new content. A pure deletion is empty: end_line = start_line - 1."""

    start_line: int
    end_line: int


@dataclass(frozen=True)
class EditPlan:
    base: str  # the base content, LF-normalised
    content: str  # the result
    changed: bool
    diff: str
    changed_ranges: list[ChangedRange]


# --- applying ops ------------------------------------------------------------------------------


def _check_slice(index: int, op: ReplaceLineRange | DeleteLineRange, lines: list[str]) -> None:
    if op.start_line < 1 or op.end_line < op.start_line:
        raise EditFailed(
            index, op.type, f"invalid range {op.start_line}-{op.end_line}: need 1 <= start_line <= end_line."
        )
    if op.end_line > len(lines):
        raise EditFailed(
            index, op.type, f"range {op.start_line}-{op.end_line} exceeds document length ({len(lines)} lines)."
        )
    existing = lines[op.start_line - 1 : op.end_line]
    if op.expected_text is not None and normalise_newlines(op.expected_text) != "\n".join(existing):
        raise EditFailed(index, op.type, f"expected_text mismatch at lines {op.start_line}-{op.end_line}.")
    if op.expected_md5 is not None and op.expected_md5.lower() != lines_md5(existing):
        raise EditFailed(
            index,
            op.type,
            f"expected_md5 mismatch at lines {op.start_line}-{op.end_line} (they hash to {lines_md5(existing)}).",
        )


def _insert(index: int, op: InsertAtLine, lines: list[str]) -> list[str]:
    count = len(lines)
    if op.position == "before":
        if not 1 <= op.line <= count + 1:
            raise EditFailed(index, op.type, f"line {op.line} out of range: 'before' takes 1..{count + 1}.")
        at = op.line - 1
    else:
        if not 1 <= op.line <= count:
            allowed = f"1..{count}" if count else "no line (the document is empty; use 'before' 1)"
            raise EditFailed(index, op.type, f"line {op.line} out of range: 'after' takes {allowed}.")
        at = op.line
    if op.expected_neighbor_text is not None:
        neighbour = lines[op.line - 1] if op.line <= count else None
        if neighbour != normalise_newlines(op.expected_neighbor_text):
            where = f"line {op.line}" if neighbour is not None else f"line {op.line} (past the end)"
            raise EditFailed(index, op.type, f"expected_neighbor_text mismatch at {where}.")
    return [*lines[:at], *split_fragment(op.content), *lines[at:]]


def apply_op(index: int, op: EditOp, lines: list[str], ends_with_newline: bool) -> tuple[list[str], bool]:
    """One op on (lines, ends_with_newline); raises EditFailed with the op's index."""
    if isinstance(op, ReplaceLineRange):
        _check_slice(index, op, lines)
        return [*lines[: op.start_line - 1], *split_fragment(op.replacement), *lines[op.end_line :]], ends_with_newline
    if isinstance(op, DeleteLineRange):
        _check_slice(index, op, lines)
        return [*lines[: op.start_line - 1], *lines[op.end_line :]], ends_with_newline
    if isinstance(op, InsertAtLine):
        return _insert(index, op, lines), ends_with_newline
    if not op.find:
        raise EditFailed(index, op.type, "find must not be empty.")
    find, replace = normalise_newlines(op.find), normalise_newlines(op.replace)
    text = join_document(lines, ends_with_newline)
    found = text.count(find)
    if found != op.expected_count:
        raise EditFailed(
            index, op.type, f"expected_count mismatch: {op.expected_count} expected, {found} found (non-overlapping)."
        )
    return split_document(text.replace(find, replace)) if found else (lines, ends_with_newline)


def apply_ops(content: str, ops: Sequence[EditOp]) -> str:
    """The content after every op, in order (LF-normalised)."""
    lines, ends_with_newline = split_document(content)
    for index, op in enumerate(ops):
        lines, ends_with_newline = apply_op(index, op, lines, ends_with_newline)
    return join_document(lines, ends_with_newline)


# --- diffs -------------------------------------------------------------------------------------


def _keepends(text: str) -> list[str]:
    """Lines with their LF terminators (str.splitlines would also split on other characters)."""
    lines = text.split("\n")
    last = lines.pop()
    out = [line + "\n" for line in lines]
    if last:
        out.append(last)
    return out


class _Matcher(difflib.SequenceMatcher):
    """SequenceMatcher that sets the common head and tail aside first.

    Edits are usually local; matching only the differing middle keeps large documents fast
    and the hunks where a reader expects them.
    """

    def __init__(self, a: list[str], b: list[str]) -> None:
        head = 0
        limit = min(len(a), len(b))
        while head < limit and a[head] == b[head]:
            head += 1
        tail = 0
        while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
            tail += 1
        self._head, self._tail, self._full = head, tail, (a, b)
        super().__init__(None, a[head : len(a) - tail], b[head : len(b) - tail])

    def get_opcodes(self) -> list[tuple[str, int, int, int, int]]:
        if self.opcodes is None:
            a, b = self._full
            h = self._head
            ops = [("equal", 0, h, 0, h)] if h else []
            for tag, i1, i2, j1, j2 in super().get_opcodes():
                if tag == "equal" and ops and ops[-1][0] == "equal":
                    prev = ops.pop()
                    ops.append(("equal", prev[1], i2 + h, prev[3], j2 + h))
                else:
                    ops.append((tag, i1 + h, i2 + h, j1 + h, j2 + h))
            if self._tail:
                if ops and ops[-1][0] == "equal":
                    prev = ops.pop()
                    ops.append(("equal", prev[1], len(a), prev[3], len(b)))
                else:
                    ops.append(("equal", len(a) - self._tail, len(a), len(b) - self._tail, len(b)))
            self.opcodes = ops
        return self.opcodes


def _unified_range(start: int, stop: int) -> str:
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def _diff_line(prefix: str, line: str) -> Iterator[str]:
    if line.endswith("\n"):
        yield prefix + line
    else:
        yield f"{prefix}{line}\n"
        yield "\\ No newline at end of file\n"


def unified_diff(old: str, new: str, *, path: str = "document.md", context: int = DIFF_CONTEXT) -> str:
    """A two-file unified patch (`git apply` / `patch -p1` accept it); "" when nothing changed."""
    a, b = _keepends(old), _keepends(new)
    if a == b:
        return ""
    out = [f"--- a/{path}\n", f"+++ b/{path}\n"]
    for group in _Matcher(a, b).get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        out.append(f"@@ -{_unified_range(first[1], last[2])} +{_unified_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for line in a[i1:i2]:
                    out.extend(_diff_line(" ", line))
                continue
            for line in a[i1:i2]:
                out.extend(_diff_line("-", line))
            for line in b[j1:j2]:
                out.extend(_diff_line("+", line))
    return "".join(out)


def changed_ranges(old: str, new: str) -> list[ChangedRange]:
    """Where the new content differs from the old, in new-content line numbers."""
    return [
        ChangedRange(j1 + 1, j2)
        for tag, _, _, j1, j2 in _Matcher(_keepends(old), _keepends(new)).get_opcodes()
        if tag != "equal"
    ]


def plan_edit(content: str, ops: Sequence[EditOp], *, path: str = "document.md") -> EditPlan:
    """Apply ops to a version's content and describe the result; a dry run and a real run share it."""
    base = normalise_newlines(content)
    new = apply_ops(base, ops)
    if new == base:
        return EditPlan(base=base, content=new, changed=False, diff="", changed_ranges=[])
    return EditPlan(
        base=base,
        content=new,
        changed=True,
        diff=unified_diff(base, new, path=path),
        changed_ranges=changed_ranges(base, new),
    )
