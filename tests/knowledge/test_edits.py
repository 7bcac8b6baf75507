"""Edit ops and diffs (pure), plus the `document_edit` service's dry-run/real-run contract."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowledge.edit_services import document_edit
from knowledge.edits import (
    DeleteLineRange,
    EditFailed,
    InsertAtLine,
    ReplaceLineRange,
    ReplaceLiteral,
    apply_op,
    apply_ops,
    changed_ranges,
    plan_edit,
    unified_diff,
)
from knowledge.models import DocumentVersion
from knowledge.services import document_create
from knowledge.structure import join_document, split_document
from workspaces.services import namespace_create

DOC = "# Title\none\ntwo\nthree\n"


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def failure(content: str, ops: list) -> EditFailed:
    with pytest.raises(EditFailed) as caught:
        apply_ops(content, ops)
    assert caught.value.code == "edit_failed"
    return caught.value


# --- ops ---------------------------------------------------------------------------------------


def test_replace_line_range_with_guards():
    ops = [ReplaceLineRange(2, 3, "ONE\nTWO\nextra", expected_text="one\ntwo", expected_md5=md5("one\ntwo").upper())]
    assert apply_ops(DOC, ops) == "# Title\nONE\nTWO\nextra\nthree\n"


def test_replace_line_range_mismatches_name_the_op():
    error = failure(DOC, [ReplaceLineRange(2, 2, "x"), ReplaceLineRange(2, 2, "y", expected_text="one")])
    assert error.message == "ops[1] (replace_line_range): expected_text mismatch at lines 2-2."
    assert error.extra == {"op_index": 1, "op_type": "replace_line_range"}
    error = failure(DOC, [ReplaceLineRange(2, 2, "x", expected_md5="0" * 32)])
    assert "expected_md5 mismatch" in error.message and md5("one") in error.message
    assert "exceeds document length (4 lines)" in failure(DOC, [ReplaceLineRange(4, 5, "x")]).message
    assert "invalid range 3-2" in failure(DOC, [ReplaceLineRange(3, 2, "x")]).message


def test_insert_before_after_and_append():
    assert apply_ops(DOC, [InsertAtLine(1, "top")]) == "top\n" + DOC
    assert apply_ops(DOC, [InsertAtLine(2, "mid", position="after", expected_neighbor_text="one")]) == (
        "# Title\none\nmid\ntwo\nthree\n"
    )
    assert apply_ops(DOC, [InsertAtLine(5, "end")]) == DOC + "end\n"
    assert apply_ops("no newline", [InsertAtLine(1, "end", position="after")]) == "no newline\nend"
    assert apply_ops("", [InsertAtLine(1, "first")]) == "first\n"


def test_insert_errors():
    assert "'before' takes 1..5" in failure(DOC, [InsertAtLine(6, "x")]).message
    assert "'after' takes 1..4" in failure(DOC, [InsertAtLine(5, "x", position="after")]).message
    assert "document is empty" in failure("", [InsertAtLine(1, "x", position="after")]).message
    assert (
        "expected_neighbor_text mismatch at line 2"
        in failure(DOC, [InsertAtLine(2, "x", expected_neighbor_text="two")]).message
    )
    assert "past the end" in failure(DOC, [InsertAtLine(5, "x", expected_neighbor_text="")]).message


def test_delete_line_range():
    assert apply_ops(DOC, [DeleteLineRange(2, 3, expected_md5=md5("one\ntwo"))]) == "# Title\nthree\n"
    assert apply_ops(DOC, [DeleteLineRange(1, 4)]) == ""
    assert "delete_line_range" in failure(DOC, [DeleteLineRange(2, 2, expected_text="two")]).message


def test_replace_literal_counts_exactly_and_spans_lines():
    assert apply_ops("aaaa", [ReplaceLiteral("aa", "b", 2)]) == "bb"  # non-overlapping
    assert apply_ops(DOC, [ReplaceLiteral("one\ntwo", "both", 1)]) == "# Title\nboth\nthree\n"
    assert apply_ops(DOC, [ReplaceLiteral("missing", "x", 0)]) == DOC
    error = failure(DOC, [ReplaceLiteral("o", "0", 1)])
    assert error.message == "ops[0] (replace_literal): expected_count mismatch: 1 expected, 2 found (non-overlapping)."
    assert "0 found" in failure(DOC, [ReplaceLiteral("missing", "x", 1)]).message


def test_ops_apply_in_order_on_the_previous_result():
    ops = [
        InsertAtLine(1, "new first"),
        ReplaceLineRange(2, 2, "# Renamed", expected_text="# Title"),
        DeleteLineRange(5, 5),
    ]
    assert apply_ops(DOC, ops) == "new first\n# Renamed\none\ntwo\n"


def test_crlf_content_and_crlf_op_text_are_normalised():
    content = DOC.replace("\n", "\r\n")
    ops = [ReplaceLineRange(2, 3, "x\r\ny", expected_text="one\r\ntwo"), ReplaceLiteral("three\r\n", "3\r\n", 1)]
    assert apply_ops(content, ops) == "# Title\nx\ny\n3\n"


def test_the_final_newline_is_kept_or_left_out_as_it_was():
    assert apply_ops("a\nb", [ReplaceLineRange(2, 2, "c")]) == "a\nc"
    assert apply_ops("a\nb\n", [ReplaceLineRange(2, 2, "c")]) == "a\nc\n"
    # an empty last line is a line: it survives a round trip
    result = apply_ops("a\nb", [ReplaceLineRange(2, 2, "")])
    assert result == "a\n\n" and split_document(result)[0] == ["a", ""]


# --- diffs -------------------------------------------------------------------------------------


def test_unified_diff_and_changed_ranges():
    plan = plan_edit(DOC, [ReplaceLineRange(3, 3, "TWO"), InsertAtLine(5, "four")], path="notes/a.md")
    assert plan.changed
    assert plan.diff == (
        "--- a/notes/a.md\n+++ b/notes/a.md\n@@ -1,4 +1,5 @@\n # Title\n one\n-two\n+TWO\n three\n+four\n"
    )
    assert [(r.start_line, r.end_line) for r in plan.changed_ranges] == [(3, 3), (5, 5)]


def test_pure_deletion_is_an_empty_range_and_no_op_has_no_diff():
    assert [(r.start_line, r.end_line) for r in changed_ranges(DOC, "# Title\nthree\n")] == [(2, 1)]
    plan = plan_edit(DOC.replace("\n", "\r\n"), [ReplaceLiteral("zzz", "y", 0)])
    assert (plan.changed, plan.diff, plan.changed_ranges) == (False, "", [])


def test_missing_final_newline_is_marked():
    diff = unified_diff("a\nb", "a\nb\n")
    assert diff.endswith("-b\n\\ No newline at end of file\n+b\n")
    assert [(r.start_line, r.end_line) for r in changed_ranges("a\nb", "a\nb\n")] == [(2, 2)]


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_git_apply_accepts_the_diff(tmp_path: Path):
    old = "".join(f"line {i}\n" for i in range(1, 40)) + "tail"
    ops = [
        ReplaceLineRange(3, 4, "x"),
        DeleteLineRange(20, 22),
        InsertAtLine(37, "y"),
        ReplaceLiteral("tail", "end", 1),
    ]
    plan = plan_edit(old, ops, path="doc.md")
    (tmp_path / "doc.md").write_text(old)
    (tmp_path / "change.patch").write_text(plan.diff)
    subprocess.run(["git", "apply", "change.patch"], cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "doc.md").read_text() == plan.content


def apply_patch(old: str, diff: str) -> str:
    """A strict unified-diff applier, to check that a diff really turns `old` into the result."""
    if not diff:
        return old
    source = [line + "\n" for line in old.split("\n")]
    source[-1] = source[-1].removesuffix("\n")
    if not source[-1]:
        source.pop()
    body = diff.split("\n")[2:-1]  # without the ---/+++ header and the final empty piece
    out: list[str] = []
    position = 0
    for index, raw in enumerate(body):
        if raw.startswith("\\"):
            continue
        if raw.startswith("@@"):
            start, length = re.match(r"@@ -(\d+)(?:,(\d+))? ", raw).groups()
            target = int(start) if length == "0" else int(start) - 1
            assert target >= position
            out.extend(source[position:target])
            position = target
            continue
        text = raw[1:] + ("" if index + 1 < len(body) and body[index + 1].startswith("\\") else "\n")
        if raw[0] in " -":
            assert source[position] == text
            position += 1
        if raw[0] in " +":
            out.append(text)
    out.extend(source[position:])
    return "".join(out)


# --- properties --------------------------------------------------------------------------------

LINE = st.sampled_from(["", "# H", "## Sub", "text", "more text", "```", "x = 1", "- item", "a b a"])
DOCUMENT = st.builds(
    lambda lines, final, crlf: ("\r\n" if crlf else "\n").join(lines) + (("\r\n" if crlf else "\n") if final else ""),
    st.lists(LINE, max_size=15),
    st.booleans(),
    st.booleans(),
)
FRAGMENT = st.lists(LINE, min_size=1, max_size=3).map("\n".join)


@st.composite
def documents_and_ops(draw: st.DrawFn) -> tuple[str, list]:
    """A document and a sequence of ops, each valid on the result of the ones before it."""
    content = draw(DOCUMENT)
    lines, final = split_document(content)
    ops: list = []
    for _ in range(draw(st.integers(1, 5))):
        count = len(lines)
        kinds = ["insert", "literal"] + (["replace", "delete", "insert_after"] if count else [])
        kind = draw(st.sampled_from(kinds))
        if kind in ("replace", "delete"):
            start = draw(st.integers(1, count))
            end = draw(st.integers(start, count))
            existing = "\n".join(lines[start - 1 : end])
            guard = draw(st.sampled_from(["none", "text", "md5"]))
            checks = {"expected_text": existing} if guard == "text" else {}
            checks.update({"expected_md5": md5(existing)} if guard == "md5" else {})
            op = (
                ReplaceLineRange(start, end, draw(FRAGMENT), **checks)
                if kind == "replace"
                else DeleteLineRange(start, end, **checks)
            )
        elif kind == "insert":
            line = draw(st.integers(1, count + 1))
            neighbour = lines[line - 1] if line <= count and draw(st.booleans()) else None
            op = InsertAtLine(line, draw(FRAGMENT), expected_neighbor_text=neighbour)
        elif kind == "insert_after":
            op = InsertAtLine(draw(st.integers(1, count)), draw(FRAGMENT), position="after")
        else:
            text = join_document(lines, final)
            find = draw(st.sampled_from(["text", "a", "\n", "# H\n", "zzz", "a b"]))
            op = ReplaceLiteral(find, draw(st.sampled_from(["", "b", "text\nmore"])), text.count(find))
        lines, final = apply_op(len(ops), op, lines, final)
        ops.append(op)
    return content, ops


@settings(max_examples=300, deadline=None, database=None)
@given(documents_and_ops())
def test_valid_ops_apply_and_their_diff_reproduces_the_result(case):
    content, ops = case
    plan = plan_edit(content, ops, path="doc.md")
    assert plan.content == apply_ops(content, ops)
    assert split_document(plan.content) == split_document(join_document(*split_document(plan.content)))
    assert plan.changed == (plan.content != plan.base)
    assert apply_patch(plan.base, plan.diff) == plan.content
    line_count = len(split_document(plan.content)[0])
    for changed in plan.changed_ranges:
        assert 1 <= changed.start_line <= changed.end_line + 1 <= line_count + 1
    assert plan_edit(content, ops, path="doc.md") == plan  # deterministic: a dry run shows the real diff


@pytest.fixture
def edit_target(db, alice):
    namespace = namespace_create(actor=alice.actor, slug="props")
    return alice, namespace


@settings(max_examples=20, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=documents_and_ops())
def test_a_dry_run_shows_exactly_the_real_runs_diff(edit_target, case):
    alice, namespace = edit_target
    content, ops = case
    path = f"p/{uuid.uuid4().hex}.md"
    document = document_create(actor=alice.actor, namespace=namespace, path=path, content=content)
    dry = document_edit(actor=alice.actor, document_id=document.pk, ops=ops, dry_run=True)
    assert DocumentVersion.objects.filter(document=document).count() == 1
    real = document_edit(actor=alice.actor, document_id=document.pk, ops=ops, expected_version=1)
    assert (real.diff, real.changed_ranges, real.content, real.changed) == (
        dry.diff,
        dry.changed_ranges,
        dry.content,
        dry.changed,
    )
    versions = DocumentVersion.objects.filter(document=document)
    assert versions.count() == (2 if real.changed else 1)
    if real.changed:
        assert real.new_version.number == 2 and versions.get(number=2).content == dry.content
        assert versions.get(number=2).metadata["base_version_number"] == 1
    else:
        assert real.new_version is None


def test_a_change_between_planning_and_writing_is_a_conflict(edit_target, monkeypatch):
    """The write rechecks the base version under the row lock: a concurrent revise wins, we get 409."""
    from knowledge import edit_services
    from knowledge.exceptions import VersionConflict
    from knowledge.services import document_revise

    alice, namespace = edit_target
    document = document_create(actor=alice.actor, namespace=namespace, path="race.md", content=DOC)
    real_plan = edit_services.plan_edit

    def plan_then_lose_the_race(*args, **kwargs):
        plan = real_plan(*args, **kwargs)
        document_revise(actor=alice.actor, document_id=document.pk, content="someone else\n")
        return plan

    monkeypatch.setattr(edit_services, "plan_edit", plan_then_lose_the_race)
    with pytest.raises(VersionConflict) as caught:
        document_edit(actor=alice.actor, document_id=document.pk, ops=[InsertAtLine(1, "x")], expected_version=1)
    assert caught.value.extra["current_version"]["number"] == 2
    assert [v.content for v in DocumentVersion.objects.filter(document=document).order_by("number")] == [
        DOC,
        "someone else\n",
    ]
