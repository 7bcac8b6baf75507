"""Find a document's headings: a fast line scanner, with a CommonMark parse when it is unsure.

A full CommonMark parse (markdown-it-py) costs about 0.35 s per MiB in Python, so a 10 MiB
document took seconds to outline. Headings only depend on a few constructs: ATX and setext
headings, fenced code, HTML blocks and front matter at the top level. `_scan` finds the lines
that can matter with one regular expression and follows those constructs exactly. Whatever
could change the answer in ways it does not model (headings, fences or underlines inside list
items and block quotes, indented lines that could belong to a list, tables or reference
definitions under an underline, HTML blocks it cannot bound) makes it give up, and the
document is parsed with markdown-it instead. The two paths give the same headings: the tests
compare them on generated and real documents.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_block.html_block import HTML_SEQUENCES
from markdown_it.token import Token

from knowledge.content import FRONTMATTER, parse_frontmatter


@dataclass(frozen=True)
class RawHeading:
    level: int
    title: str
    start_line: int
    end_of_heading: int  # last line of the heading itself (setext headings span 2+ lines)


def raw_headings(text: str) -> list[RawHeading]:
    """Headings of LF-normalised text in document order, empty titles dropped."""
    source = _markdown_source(text)
    scanned = _scan(source)
    return scanned if scanned is not None else _parsed(source)


def _markdown_source(text: str) -> str:
    """What both paths see: front matter blanked (line numbers kept), lone CRs made spaces.

    markdown-it treats a lone CR as a line break; our line model does not, so it must not either.
    NUL becomes U+FFFD, as markdown-it does itself, so that the scanner's titles match.
    """
    match = FRONTMATTER.match(text)
    if match and parse_frontmatter(text):
        text = "\n" * match.group(0).count("\n") + text[match.end() :]
    if "\r" in text:
        text = text.replace("\r", " ")
    if "\0" in text:
        text = text.replace("\0", "\ufffd")
    return text


# --- titles ------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _block_parser() -> MarkdownIt:
    # Inline parsing is the expensive part and only heading text needs it.
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).disable("inline")


@lru_cache(maxsize=1)
def _inline_parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["strikethrough"])


# Characters through which inline markdown can change a title's text; without them it is plain.
_INLINE_SYNTAX = re.compile(r"[\\`*_~\[\]!<&]")


def _plain_text(tokens: list[Token]) -> str:
    """Heading text through emphasis, links, code spans and image alt text; raw HTML dropped."""
    parts: list[str] = []
    for token in tokens:
        if token.type in ("text", "code_inline"):
            parts.append(token.content)
        elif token.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif token.children:
            parts.append(_plain_text(token.children))
    return "".join(parts)


def _title(source: str, env: dict[str, Any]) -> str:
    if _INLINE_SYNTAX.search(source):
        tokens = _inline_parser().parseInline(source, env)
        source = _plain_text(tokens[0].children or []) if tokens else ""
    return " ".join(source.split())  # str.split and re's \s agree on what whitespace is


# --- the CommonMark parse ----------------------------------------------------------------------


def _parsed(source: str) -> list[RawHeading]:
    env: dict[str, Any] = {}
    tokens = _block_parser().parse(source, env)
    found: list[RawHeading] = []
    for index, token in enumerate(tokens):
        if token.type != "heading_open" or token.map is None:
            continue
        title = _title(tokens[index + 1].content, env)
        if title:  # an empty heading is no section
            found.append(RawHeading(int(token.tag[1]), title, token.map[0] + 1, token.map[1]))
    return found


# --- the scanner -------------------------------------------------------------------------------

_CONTAINERS = r" {0,3}(?:(?:[-+*]|\d{1,9}[.)])(?:[ \t]++|(?=\n|\Z))|>[ \t]*+)++"
_MATTERS_NESTED = r"(?:#{1,6}(?=[ \t\n]|\Z)|`{3}|~{3}|(?:=+|-+)[ \t]*(?=\n|\Z)|<)"
_CANDIDATE = re.compile(
    r"\n(?=[ \t`~#=<>+*\d-])(?:"
    r"(?P<fence> {0,3}(?:`{3,}|~{3,}))"
    r"|(?P<atx> {0,3}#{1,6})(?=[ \t\n]|\Z)"
    r"|(?P<underline> {0,3}(?:=+|-+)[ \t]*(?=\n|\Z))"
    r"|(?P<html> {0,3}<)"
    # Lines that would matter inside a list item or a block quote, which the scanner does not
    # follow: behind container markers, or indented as far as list content can be.
    rf"|(?P<nested>{_CONTAINERS}{_MATTERS_NESTED}|(?: {{4,}}| *\t)[ \t]*{_MATTERS_NESTED})"
    r")"
)
_ATX_CLOSING = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_FENCE_OPENING = re.compile(r"( {0,3})(`{3,}|~{3,})")
_BLANK_LINE = re.compile(r"\n[ \t]*(?=\n|\Z)")
_THEMATIC_BREAK = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*")
# Paragraph lines under which an underline may be something else: list items, block quotes,
# HTML, link reference definitions, table rows.
_UNSURE_PARAGRAPH_LINE = re.compile(r" {0,3}(?:[<\[>]|(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$))|.*\|")


def _html_block_kind(line: str) -> int | None:
    """Which CommonMark HTML block (0-6 for types 1-7) a line's text starts, if any."""
    return next((kind for kind, (opens, _, _) in enumerate(HTML_SEQUENCES) if opens.search(line)), None)


@lru_cache(maxsize=64)
def _closing_fence(character: str, length: int) -> re.Pattern[str]:
    return re.compile(rf"\n( *){re.escape(character)}{{{length},}}[ \t]*(?=\n|\Z)")


@lru_cache(maxsize=4)
def _outdented_line(indent: int) -> re.Pattern[str]:
    return re.compile(rf"\n {{0,{indent - 1}}}[^ \n]")


class _Unsure(Exception):
    """The scanner met a construct it does not model; the caller parses instead."""


def _scan(source: str) -> list[RawHeading] | None:
    try:
        return _Scanner(source).headings()
    except _Unsure:
        return None


class _Scanner:
    """One forward pass over the lines of `source` that can start or hide a heading.

    Positions are offsets in the source; a line is named by the offset of the newline before
    it, -1 for the first line.
    """

    def __init__(self, source: str) -> None:
        self.text = source
        self.found: list[RawHeading] = []
        self.block_end = 0  # the last line that ended a block a paragraph cannot continue
        self._references: bool | None = None
        self._counted_to = self._newlines = 0

    def headings(self) -> list[RawHeading]:
        first_end = self._end_of_line(-1)
        first = _CANDIDATE.match("\n" + self.text[:first_end])
        position = self._candidate(first.lastgroup, -1, first.end() - 1) if first else first_end
        while (match := _CANDIDATE.search(self.text, position)) is not None:
            position = self._candidate(match.lastgroup, match.start(), match.end())
        return self.found

    def _candidate(self, kind: str | None, start: int, match_end: int) -> int:
        """Handle the candidate line after `start`; returns where the search goes on."""
        number = self._line_after(start)
        end = self._end_of_line(start)
        line = self.text[start + 1 : end]
        if kind == "atx":
            self._atx(line, number)
        elif kind == "underline":
            self._underline(line, number, start)
        elif kind == "fence":
            return self._fence(line, end)
        elif kind == "html":
            return self._html(line, number, start, end)
        else:  # nested: anything but an autolink or inline HTML in a list item is a blind spot
            tail = self.text[match_end - 1 : end]
            if tail[0] != "<" or _html_block_kind(tail) is not None:
                raise _Unsure
        return end

    def _end_of_line(self, start: int) -> int:
        end = self.text.find("\n", start + 1)
        return len(self.text) if end < 0 else end

    def _line_of(self, position: int) -> int:
        """Number of the line holding `position` (>= any position asked so far)."""
        return self._newlines + self.text.count("\n", self._counted_to, position) + 1

    def _line_after(self, newline: int) -> int:
        """Number of the line after the newline at `newline`; moves the running count there."""
        number = self._line_of(newline + 1)
        self._newlines, self._counted_to = number - 1, newline + 1
        return number

    def _atx(self, line: str, number: int) -> None:
        stripped = line.lstrip(" ")
        level = len(stripped) - len(stripped.lstrip("#"))
        content = stripped[level:].strip(" \t")
        if content.endswith("#"):
            content = _ATX_CLOSING.sub("", content)
        self._add(level, content, number, number)
        self.block_end = number

    def _underline(self, line: str, number: int, start: int) -> None:
        marker = line.strip(" \t")
        paragraph = self._paragraph_above(start, number)
        if paragraph is not None:
            self._add(1 if marker[0] == "=" else 2, "\n".join(paragraph), number - len(paragraph), number)
            self.block_end = number
        elif marker[0] == "-" and len(marker) >= 3:
            self.block_end = number  # a thematic break
        # Otherwise ("===", "-", "--" with no paragraph above) the line is paragraph text.

    def _paragraph_above(self, start: int, number: int) -> list[str] | None:
        """The lines of the paragraph an underline closes, or None when there is none."""
        lines: list[str] = []
        end = start
        while number - len(lines) - 1 > self.block_end:
            line_start = self.text.rfind("\n", 0, end)
            line = self.text[line_start + 1 : end]
            if not line.strip(" \t") or _THEMATIC_BREAK.fullmatch(line):
                break
            lines.append(line)
            end = line_start
        if not lines:
            return None
        lines.reverse()
        if lines[0][:1] in (" ", "\t") or any(_UNSURE_PARAGRAPH_LINE.match(line) for line in lines):
            raise _Unsure
        return lines

    def _fence(self, line: str, end: int) -> int:
        """Skip a fenced code block; returns where scanning goes on."""
        opening = _FENCE_OPENING.match(line)
        assert opening is not None  # the candidate pattern matched a fence
        indent, marker = len(opening.group(1)), opening.group(2)
        if marker[0] == "`" and "`" in line[opening.end() :]:
            return end  # "```a`b" opens an inline code span in a paragraph, not a fence
        close = _closing_fence(marker[0], len(marker)).search(self.text, end)
        body_end = close.start() if close is not None else len(self.text)
        if close is not None and not indent <= len(close.group(1)) <= 3:
            raise _Unsure  # inside a list item this would or would not close the fence
        if indent and _outdented_line(indent).search(self.text, end, body_end):
            raise _Unsure  # an indented fence whose lines could end the list item it sits in
        if close is None:
            self.block_end = self._line_of(len(self.text))
            return len(self.text)
        self.block_end = self._line_of(close.start() + 1)
        return self._end_of_line(close.start())

    def _html(self, line: str, number: int, start: int, end: int) -> int:
        """Skip an HTML block; returns where scanning goes on."""
        stripped = line.lstrip(" ")
        kind = _html_block_kind(stripped)
        if kind is None:
            return end  # inline HTML or an autolink inside a paragraph
        closes = HTML_SEQUENCES[kind][1]
        if kind < 5:  # script/pre/style/textarea, comment, processing instruction, declaration, CDATA
            close = closes.search(self.text, start + 1)
            block_end = self._end_of_line(close.end() - 1) if close is not None else len(self.text)
        else:  # block-level tags and lone tags end before a blank line
            blank = _BLANK_LINE.search(self.text, end)
            block_end = blank.start() if blank is not None else len(self.text)
        if kind == 6 or line != stripped:
            # A lone tag cannot interrupt a paragraph, and an indented block may sit in a list
            # item that ends first: the lines below could be markdown after all.
            inside = _CANDIDATE.search(self.text, end)
            if inside is not None and inside.start() < block_end:
                raise _Unsure
        self.block_end = self._line_of(block_end)
        return block_end

    def _add(self, level: int, source: str, start_line: int, end_of_heading: int) -> None:
        if "[" in source:
            if self._references is None:
                self._references = "]:" in self.text
            if self._references:
                raise _Unsure  # "[x]" is a link only if the document defines x
        title = _title(source, {})
        if title:
            self.found.append(RawHeading(level, title, start_line, end_of_heading))
