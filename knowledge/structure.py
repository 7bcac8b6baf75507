"""Document structure: the heading outline and line-range selection (pure, no ORM).

Line model, shared with `knowledge.edits`: CRLF becomes LF, lines are 1-based, and a final
newline ends the last line instead of starting an empty one (`"a\\nb\\n"` has 2 lines, like an
editor shows it). Text *inside* a range (range content, `expected_text`, replacement text) is
lines joined with "\\n", so what a range returns can be sent back unchanged.

Headings follow CommonMark (`knowledge.headings`: a fast scanner checked against markdown-it-py),
so `#` lines inside fenced or indented code are not headings and setext headings count. YAML
front matter is not parsed as markdown: its closing `---` would otherwise turn the last
front-matter line into a setext heading.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import asdict, dataclass
from itertools import accumulate
from typing import Any

from config.exceptions import Invalid
from knowledge.headings import raw_headings

MAX_DEPTH = 6
SECTION_REF = re.compile(r"root(?:\.h[1-6]\[[1-9][0-9]*\])+")
_PUNCTUATION = re.compile(r"[^\w\s-]")
_SPACES = re.compile(r"\s+")
_CRLF = re.compile(r"\r+\n")


# --- lines -------------------------------------------------------------------------------------


def normalise_newlines(text: str) -> str:
    """CRLF to LF. Any run of CRs before a LF goes, so normalising twice changes nothing."""
    return _CRLF.sub("\n", text) if "\r" in text else text


def split_document(text: str) -> tuple[list[str], bool]:
    """(lines, ends_with_newline) of LF-normalised text; `join_document` is its inverse."""
    text = normalise_newlines(text)
    if text == "":
        return [], True
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
        return lines, True
    return lines, False


def join_document(lines: list[str], ends_with_newline: bool) -> str:
    """Render lines as document text.

    A last line that is empty always gets its newline: without it the line would vanish when
    the text is split again, and every line number after an edit has to survive a round trip.
    """
    if not lines:
        return ""
    text = "\n".join(lines)
    if ends_with_newline or lines[-1] == "":
        text += "\n"
    return text


def split_fragment(text: str) -> list[str]:
    """Lines of text sent *into* a range (replacement, inserted content): a plain split on LF."""
    return normalise_newlines(text).split("\n")


def lines_md5(lines: list[str]) -> str:
    """The `content_md5` of a range: md5 hex of its lines joined with LF (no trailing newline)."""
    return hashlib.md5("\n".join(lines).encode("utf-8"), usedforsecurity=False).hexdigest()


# --- outline -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Heading:
    level: int
    title: str
    heading_path: str
    section_ref: str
    occurrence: int
    start_line: int
    end_line: int
    content_start_line: int
    chars: int
    anchor: str

    def as_dict(self) -> dict[str, Any]:
        # Flat fields only, so a copy of the instance dict is `asdict` without its deep walk
        # (which costs ~40 ms over the 5,000 headings of a 10 MiB document).
        return dict(vars(self))


@dataclass(frozen=True)
class Outline:
    line_count: int
    headings: tuple[Heading, ...]

    def up_to(self, max_depth: int = MAX_DEPTH) -> list[Heading]:
        """Headings of level <= max_depth. Section bounds always account for every heading."""
        return [heading for heading in self.headings if heading.level <= max_depth]

    def approximate_size(self) -> int:
        """Bytes this outline holds in memory, roughly (for `knowledge.version_cache`)."""
        return 128 + sum(_HEADING_BYTES + 2 * (len(h.title) + len(h.heading_path)) for h in self.headings)


_HEADING_BYTES = 700  # a Heading instance, its dict, ints and short strings


def approximate_size(lines: list[str]) -> int:
    """Bytes a list of lines holds in memory, roughly: the text plus a str object per line."""
    return 56 + sum(map(len, lines)) + 57 * len(lines)


def slugify(title: str) -> str:
    """Anchor for a title: lowercase, punctuation stripped, spaces to '-', 'section' if empty."""
    slug = _SPACES.sub("-", _PUNCTUATION.sub("", title.lower()).strip())
    return slug or "section"


def outline(text: str) -> Outline:
    """Every heading with its section bounds, breadcrumb, occurrence and section ref.

    Section refs follow heading depth, not nesting of the stack: `# A` then `#### D` gives
    `root.h1[1].h4[1]`; ordinals count same-level headings under the same parent.
    """
    text = normalise_newlines(text)
    lines, _ = split_document(text)
    line_count = len(lines)
    # widths[i] = characters in lines 1..i without their newlines (C-level: no Python loop over
    # the 200,000 lines of a 10 MiB document); line i+1 starts at widths[i] + i.
    widths = [0, *accumulate(map(len, lines))]

    def line_start(line: int) -> int:
        return min(widths[line - 1] + line - 1, len(text))

    raw = raw_headings(text)

    # A section ends before the next heading of the same or a higher level, else at EOF.
    ends = [line_count] * len(raw)
    open_sections: list[int] = []
    for position, heading in enumerate(raw):
        while open_sections and raw[open_sections[-1]].level >= heading.level:
            ends[open_sections.pop()] = heading.start_line - 1
        open_sections.append(position)

    headings: list[Heading] = []
    stack: list[tuple[int, str, str]] = []  # (level, section_ref, title) of open ancestors
    ordinals: Counter[tuple[str, int]] = Counter()
    occurrences: Counter[str] = Counter()
    for heading, end_line in zip(raw, ends, strict=True):
        while stack and stack[-1][0] >= heading.level:
            stack.pop()
        parent_ref = stack[-1][1] if stack else "root"
        ordinals[parent_ref, heading.level] += 1
        section_ref = f"{parent_ref}.h{heading.level}[{ordinals[parent_ref, heading.level]}]"
        path = " > ".join([*(title for _, _, title in stack), heading.title])
        occurrences[path] += 1
        stack.append((heading.level, section_ref, heading.title))
        headings.append(
            Heading(
                level=heading.level,
                title=heading.title,
                heading_path=path,
                section_ref=section_ref,
                occurrence=occurrences[path],
                start_line=heading.start_line,
                end_line=end_line,
                content_start_line=heading.end_of_heading + 1,
                chars=line_start(end_line + 1) - line_start(heading.start_line),
                anchor=slugify(heading.title),
            )
        )
    return Outline(line_count=line_count, headings=tuple(headings))


# --- ranges ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceRange:
    start_line: int
    end_line: int
    omitted_before: int
    omitted_after: int


@dataclass(frozen=True)
class LineRange:
    start_line: int
    end_line: int
    context_start_line: int
    context_end_line: int
    source_range: SourceRange | None
    content: str
    numbered_content: str | None
    content_md5: str

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.source_range is None:
            data.pop("source_range")
        if self.numbered_content is None:
            data.pop("numbered_content")
        return data


def _normalise_path(path: str) -> str:
    return " > ".join(_SPACES.sub(" ", part).strip() for part in path.split(">"))


def find_section(
    found: Outline,
    *,
    section_ref: str | None = None,
    heading_path: str | None = None,
    occurrence: int = 1,
) -> Heading:
    """The heading a section ref or heading path (+ occurrence) names, or a coded 400."""
    if section_ref:
        ref = section_ref.strip()
        for heading in found.headings:
            if heading.section_ref == ref:
                return heading
        hint = "" if SECTION_REF.fullmatch(ref) else " (refs look like root.h1[1].h2[3]; see the outline)"
        raise Invalid(f"Section ref not found: {section_ref}{hint}", code="section_not_found")
    wanted = _normalise_path(heading_path or "")
    matches = [heading for heading in found.headings if _normalise_path(heading.heading_path) == wanted]
    if not matches:
        raise Invalid(f"Heading not found: {heading_path}", code="heading_not_found")
    if occurrence > len(matches):
        raise Invalid(
            f'Heading "{heading_path}" occurrence {occurrence} not found (matches: {len(matches)})',
            code="occurrence_not_found",
            matches=len(matches),
        )
    return matches[occurrence - 1]


def select_range(
    text: str | list[str],
    *,
    section_ref: str | None = None,
    heading_path: str | None = None,
    occurrence: int = 1,
    start_line: int | None = None,
    end_line: int | None = None,
    context_lines: int = 2,
    offset_lines: int | None = None,
    max_lines: int | None = None,
    include_line_numbers: bool = True,
    found: Outline | None = None,
) -> LineRange:
    """Lines of a section or an explicit range, optionally paged, with context around them.

    `text` is the document, or its lines from `split_document` (what a cached version holds).
    Precedence: section_ref, then heading_path + occurrence, then start_line/end_line. Paging
    (offset_lines and/or max_lines) narrows the selection; context is added afterwards and
    clamped to the document. `content_md5` covers the selected lines only, so it can be sent
    as `expected_md5` in an edit of exactly that range.
    """
    lines = split_document(text)[0] if isinstance(text, str) else text
    line_count = len(lines)
    if section_ref or heading_path:
        if found is None:
            found = outline(text if isinstance(text, str) else "\n".join(lines))
        heading = find_section(found, section_ref=section_ref, heading_path=heading_path, occurrence=occurrence)
        start, end = heading.start_line, heading.end_line
    elif start_line is not None and end_line is not None:
        start, end = start_line, end_line
        if start < 1:
            raise Invalid("start_line must be 1 or more.", code="invalid_range")
        if end < start:
            raise Invalid("end_line must be greater than or equal to start_line", code="invalid_range")
        if end > line_count:
            raise Invalid(
                f"Requested range exceeds document length ({line_count} lines)",
                code="range_out_of_bounds",
                line_count=line_count,
            )
    else:
        raise Invalid("Provide start_line + end_line, section_ref, or heading_path.", code="range_required")

    source: SourceRange | None = None
    if offset_lines is not None or max_lines is not None:
        offset = offset_lines or 0
        if offset < 0:
            raise Invalid("offset_lines must be 0 or more.", code="invalid_offset")
        if offset >= end - start + 1:
            raise Invalid(
                f"offset_lines must be less than the selected range length ({end - start + 1} lines)",
                code="invalid_offset",
            )
        paged_start = start + offset
        paged_end = end if max_lines is None else min(end, paged_start + max_lines - 1)
        source = SourceRange(start, end, omitted_before=offset, omitted_after=end - paged_end)
        start, end = paged_start, paged_end

    context_start = max(1, start - context_lines)
    context_end = min(line_count, end + context_lines)
    shown = lines[context_start - 1 : context_end]
    numbered = None
    if include_line_numbers:
        numbered = "\n".join(f"{number}: {line}" for number, line in enumerate(shown, start=context_start))
    return LineRange(
        start_line=start,
        end_line=end,
        context_start_line=context_start,
        context_end_line=context_end,
        source_range=source,
        content="\n".join(shown),
        numbered_content=numbered,
        content_md5=lines_md5(lines[start - 1 : end]),
    )


def outline_data(found: Outline) -> dict[str, Any]:
    """An outline as JSON-ready data (what `DocumentOutline` stores)."""
    return {"line_count": found.line_count, "headings": [heading.as_dict() for heading in found.headings]}


def outline_from_data(line_count: int, headings: list[dict[str, Any]]) -> Outline:
    return Outline(line_count=line_count, headings=tuple(Heading(**heading) for heading in headings))
