"""Markdown -> link destinations, from the parsed token tree (pure; no ORM, no settings).

A parser, not a regex over the raw text, decides what is a link: inline links, images,
reference-style links and their definitions (used or not), and autolinks `<scheme:...>`.
Bare `agor://kb/...` URIs in prose count too (the editor inserts them), but only in text
tokens, so code spans, fenced and indented code, HTML and escaped brackets never link.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt as PyMarkdownIt
from markdown_it_pyrs import MarkdownIt, Node

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
    # markdown-it.rs builds the tree in Rust (a 10 MiB document in about a second, against
    # six for the pure-Python port); destinations come back normalised, unsafe schemes dropped.
    return MarkdownIt("commonmark").enable_many(["table", "strikethrough"])


_MD = _parser()
# Never descended into: code and raw HTML hold no links (nor does an image's alt text).
OPAQUE = frozenset({"code_inline", "fence", "code_block", "html_block", "html_inline"})
LINKS = {"link": "link", "autolink": "autolink", "image": "image"}
# Inline spans inside a block already checked by `_block_may_link`: always walked, because
# markdown-it.rs can map them to the wrong bytes (`*[a](b.md)**` after a definition: `em` at 20..31).
INLINE_SPANS = frozenset({"em", "strong", "strikethrough"})
LABEL_SPACE = re.compile(r"\s+")


def _may_link(text: str) -> bool:
    """Every link form needs `[` (links, images, references), `<` (autolinks) or an agor URI."""
    return "[" in text or "<" in text or "agor:" in text.lower()


def _block_may_link(node: Node, source: bytes) -> bool:
    """Whether the node's source could hold a link or a bare agor URI, so its subtree is worth
    walking: `_may_link` on its bytes, widened to `&` (an entity can spell part of a URI) and to
    `agor` without its colon (which an escape or entity can write). Walking every text node of
    a 10 MiB document in Python costs as much as parsing it."""
    srcmap = node.srcmap
    if not srcmap:
        return True
    piece = source[srcmap[0] : srcmap[1]]
    return b"[" in piece or b"<" in piece or b"&" in piece or b"agor" in piece.lower()


class _Lines:
    """1-based line numbers of the parser's byte offsets."""

    def __init__(self, source: bytes) -> None:
        self.starts = [m.end() for m in re.finditer(b"\n", source)]

    def of(self, node: Node) -> int | None:
        srcmap = node.srcmap
        return bisect.bisect_right(self.starts, srcmap[0]) + 1 if srcmap else None


def _bare(text: str, line: int | None) -> Iterator[LinkRef]:
    if "agor://" not in text.lower():
        return
    for match in BARE_AGOR_URI.finditer(text):
        uri = match.group(0).rstrip(TRAILING_PUNCTUATION)
        if uri:
            yield LinkRef(uri, "bare", line)


def extract_links(markdown: str) -> list[LinkRef]:
    """Every link destination in document order, definitions last (duplicates kept; resolution dedups).

    Bare agor URIs are looked for in runs of adjacent text (escapes split text into pieces)
    outside links, code and HTML; the first definition of a label wins, as for readers.
    """
    if not markdown or not _may_link(markdown):
        return []
    source = markdown.encode("utf-8")  # the parser's offsets are byte offsets
    lines = _Lines(source)
    refs: list[LinkRef] = []
    definitions: dict[str, LinkRef] = {}
    run: list[str] = []
    run_line: int | None = None

    def flush() -> None:
        nonlocal run_line
        if run:
            refs.extend(_bare("".join(run), run_line))
            run.clear()
        run_line = None

    try:
        tree = _MD.tree(markdown)
    except BaseException as exc:  # markdown-it.rs panics (a BaseException) on some inputs
        if isinstance(exc, Exception) or type(exc).__name__ != "PanicException":
            raise
        return _extract_links_slowly(markdown)
    # (children, inside a link's text): a link's own text is not prose, but may hold an image.
    stack: list[tuple[Iterator[Node], bool]] = [(iter(tree.children), False)]
    while stack:
        children, in_link = stack[-1]
        node = next(children, None)
        if node is None:
            flush()
            stack.pop()
            continue
        name = node.name
        if name in ("text", "text_special"):
            if in_link:
                continue
            if run_line is None:
                run_line = lines.of(node)
            run.append(node.meta.get("content", ""))
            continue
        flush()
        if name in LINKS:
            href = node.meta.get("url", "")
            if href:
                refs.append(LinkRef(href, LINKS[name], lines.of(node)))
            if name == "link" and node.children:
                stack.append((iter(node.children), True))
        elif name == "definition":
            label = LABEL_SPACE.sub(" ", node.meta.get("label", "").strip()).casefold()
            href = node.meta.get("destination", "")
            if href and label not in definitions:
                definitions[label] = LinkRef(href, "definition", lines.of(node))
        elif name not in OPAQUE and node.children and (name in INLINE_SPANS or _block_may_link(node, source)):
            stack.append((iter(node.children), in_link))
    refs.extend(definitions.values())
    return refs


@lru_cache(maxsize=1)
def _slow_parser() -> PyMarkdownIt:
    return PyMarkdownIt("commonmark").enable(["table", "strikethrough"])


def _extract_links_slowly(markdown: str) -> list[LinkRef]:
    """`extract_links` through the pure-Python markdown-it, for text markdown-it.rs cannot parse.

    markdown-it.rs 0.4 panics on an unclosed code span inside link text (`[`x`); the Python port
    builds the same CommonMark structure, only slower. Links inside a paragraph get the
    paragraph's first line.
    """
    env: dict[str, Any] = {}
    refs: list[LinkRef] = []
    for block in _slow_parser().parse(markdown, env):
        if block.type != "inline" or not block.children:
            continue
        line = block.map[0] + 1 if block.map else None
        run: list[str] = []
        in_link = False
        for token in [*block.children, None]:
            kind = token.type if token is not None else "end"
            if kind in ("text", "text_special"):
                if not in_link:
                    run.append(token.content)
                continue
            if run:
                refs.extend(_bare("".join(run), line))
                run.clear()
            if kind == "link_open":
                href = str(token.attrGet("href") or "")
                if href:
                    refs.append(LinkRef(href, "autolink" if token.markup == "autolink" else "link", line))
                in_link = True
            elif kind == "link_close":
                in_link = False
            elif kind == "image":
                href = str(token.attrGet("src") or "")
                if href:
                    refs.append(LinkRef(href, "image", line))
    for definition in (env.get("references") or {}).values():
        href = definition.get("href", "")
        if href:
            refs.append(LinkRef(href, "definition", definition["map"][0] + 1 if definition.get("map") else None))
    return refs
