"""Markdown -> link destinations, from the parsed token tree (pure; no ORM, no settings).

A parser, not a regex over the raw text, decides what is a link: inline links, images,
reference-style links and their definitions (used or not), and autolinks `<scheme:...>`.
Bare `agor://kb/...` URIs in prose count too (the editor inserts them), but only in text
tokens, so code spans, fenced and indented code, HTML and escaped brackets never link.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

# Bare agor URIs end at whitespace, brackets, quotes or angle brackets; trailing sentence
# punctuation is not part of them.
BARE_AGOR_URI = re.compile(r"agor://kb/[^\s<>()\[\]\"'`]+", re.IGNORECASE)
TRAILING_PUNCTUATION = ".,;:!?"


@dataclass(frozen=True)
class LinkRef:
    """One link destination as the parser normalised it, with where it came from."""

    href: str
    kind: str  # link | image | autolink | definition | bare
    line: int | None = None


def _parser() -> MarkdownIt:
    # CommonMark plus GFM tables and strikethrough: the same block structure readers see.
    # Inline parsing is done here, only for inline runs that can hold a link at all: it is
    # most of the cost on large documents (the block pass still sees every line).
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    md.core.ruler.disable(["inline", "text_join"])
    return md


_MD = _parser()


def _may_link(text: str) -> bool:
    """Every link form needs `[` (links, images, references), `<` (autolinks) or an agor URI."""
    return "[" in text or "<" in text or "agor:" in text.lower()


def _bare(text: str, line: int | None) -> Iterator[LinkRef]:
    if "agor://" not in text.lower():
        return
    for match in BARE_AGOR_URI.finditer(text):
        uri = match.group(0).rstrip(TRAILING_PUNCTUATION)
        if uri:
            yield LinkRef(uri, "bare", line)


def _inline_refs(inline: Token, env: dict[str, Any]) -> Iterator[LinkRef]:
    line = inline.map[0] + 1 if inline.map else None
    children: list[Token] = []
    _MD.inline.parse(inline.content, _MD, env, children)
    link_depth = 0
    text = ""  # adjacent text pieces (escapes split them) outside any link
    for child in children:
        if child.type in ("text", "text_special"):
            if link_depth == 0:
                text += child.content
            continue
        yield from _bare(text, line)
        text = ""
        if child.type == "link_open":
            link_depth += 1
            kind = "autolink" if child.markup == "autolink" else "link"
            yield LinkRef(str(child.attrs.get("href", "")), kind, line)
        elif child.type == "link_close":
            link_depth = max(0, link_depth - 1)
        elif child.type == "image":
            yield LinkRef(str(child.attrs.get("src", "")), "image", line)
    yield from _bare(text, line)


def extract_links(markdown: str) -> list[LinkRef]:
    """Every link destination in document order (duplicates kept; resolution dedups)."""
    if not markdown or not _may_link(markdown):
        return []
    env: dict[str, Any] = {}
    tokens = _MD.parse(markdown, env)
    refs: list[LinkRef] = []
    for token in tokens:
        if token.type == "inline" and _may_link(token.content):
            refs.extend(_inline_refs(token, env))
    for definition in (env.get("references") or {}).values():
        line_map = definition.get("map")
        refs.append(LinkRef(str(definition.get("href", "")), "definition", line_map[0] + 1 if line_map else None))
    return [ref for ref in refs if ref.href]
