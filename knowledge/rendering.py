"""Markdown to safe HTML: Python-Markdown + pymdown-extensions + Pygments, then `sanitize_html`.

What the output carries (and what the reader pages' static JavaScript picks up):

- GFM tables (alignment as `align-*` classes), task lists, `~~strikethrough~~`, bare-URL links.
- Fenced code highlighted by Pygments inside `<div class="highlight">` (the copy button is added
  client-side); ```` ```mermaid ```` becomes `<pre class="mermaid">` holding the escaped source;
  `$...$`, `$$...$$` and ```` ```math ```` become `.arithmatex` elements holding `\\(...\\)` /
  `\\[...\\]` text for KaTeX. Diagram and math sources stay inert text in the HTML.
- Headings get ids (prefixed `user-content-` by the sanitizer) and a permalink.
- Links between documents point at reader URLs: `agor://kb/<ns>/<path>`, relative links such as
  `../guides/setup.md` and the legacy `/kb/<ns>/<path>` / `/knowledge/<ns>/<path>` forms become
  `/ui/kb/<ns>/<path>`; `agor://kb/document/<id>` becomes `/ui/doc/<id>`, a route that always
  finds the document's current path. `resolve_document_links` swaps those for the current path
  when the reader may see the target, so renames never break a link and nothing leaks a path.

Rendering is a pure function of (content, namespace, path) and is cached under that key.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import threading
import types
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from html import escape
from html import unescape as html_unescape
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit
from uuid import UUID
from xml.etree.ElementTree import Element, SubElement

import markdown
from django.core.cache import cache
from markdown.extensions import Extension
from markdown.extensions.toc import slugify_unicode, unique
from markdown.inlinepatterns import InlineProcessor
from markdown.preprocessors import Preprocessor
from markdown.treeprocessors import InlineProcessor as InlineTreeprocessor
from markdown.treeprocessors import Treeprocessor, UnescapeTreeprocessor
from markdown.util import HTML_PLACEHOLDER_RE, AtomicString
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from config.exceptions import Invalid
from knowledge.paths import normalise_path
from knowledge.sanitize import ID_PREFIX, sanitize_html
from workspaces.models import SLUG_PATTERN

if TYPE_CHECKING:
    from knowledge.models import Document, DocumentVersion
    from workspaces.access import Actor

RENDERER_VERSION = "3"  # part of the cache key: bump when the output changes
READER_PREFIX = "/ui/kb/"
DOCUMENT_LINK_PREFIX = "/ui/doc/"
MERMAID_MAX_CHARS = 50_000  # mermaid's own maxTextSize; bigger diagrams are shown as code
HIGHLIGHT_MAX_CHARS = 100_000  # bigger code blocks are shown without highlighting
HIGHLIGHT_CACHE_MAX_CHARS = 4_096  # blocks up to this size keep their highlighted HTML in memory
HIGHLIGHT_CACHE_BLOCKS = 1_024  # ...this many per process (at most 4 MiB of source)
CACHE_TIMEOUT = 24 * 3600
CACHE_MAX_HTML_CHARS = 8 * 1024 * 1024

# First path segments of the JSON API under /kb/; anything else there is a legacy reader link.
API_SEGMENTS = frozenset(
    {"documents", "namespaces", "search", "graph", "schema", "docs", "redoc", "me", "teammate", "transfers"}
)
SLUG = re.compile(SLUG_PATTERN)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")
ALIGNMENT = re.compile(r"text-align:\s*(left|center|right)")
# A text node without any of these cannot match an inline pattern (code, escapes, math, links,
# images, autolinks, HTML, entities, emphasis, strikethrough, bare links and emails, breaks).
INLINE_TRIGGER = re.compile(r"[`$\\\[<&*_~@\x02\x03]|  \n|://|www\.", re.IGNORECASE)
HEADING_TAGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_UNESCAPE = UnescapeTreeprocessor()
DOCUMENT_HREF = re.compile(r'href="/ui/doc/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(#[^"]*)?"')


@dataclass(frozen=True)
class Heading:
    level: int
    id: str
    text: str


@dataclass(frozen=True)
class Rendered:
    """Sanitized HTML plus what the page needs to know about it."""

    html: str
    headings: tuple[Heading, ...] = ()
    document_ids: frozenset[str] = field(default_factory=frozenset)
    degraded: bool = False  # too much markup: part of the text is shown plain, or raw HTML inline

    @property
    def has_mermaid(self) -> bool:
        return '<pre class="mermaid">' in self.html

    @property
    def has_math(self) -> bool:
        return 'class="arithmatex"' in self.html

    @property
    def has_code(self) -> bool:
        return '<div class="highlight">' in self.html


# --- links ---------------------------------------------------------------------------------


def reader_path(namespace: str, path: str, fragment: str = "") -> str:
    """`/ui/kb/<namespace>/<path>`, percent-encoded, with an optional fragment."""
    url = f"{READER_PREFIX}{quote(namespace)}/{quote(path)}"
    return f"{url}#{fragment}" if fragment else url


def document_link(document_id: UUID | str, fragment: str = "") -> str:
    url = f"{DOCUMENT_LINK_PREFIX}{UUID(str(document_id))}"
    return f"{url}#{fragment}" if fragment else url


def _clean_path(raw: str) -> str | None:
    try:
        return normalise_path(raw)
    except Invalid:
        return None


def agor_to_reader(uri: str) -> str | None:
    """Map an `agor://kb/...` URI to a reader URL, or None when it names no document."""
    parts = urlsplit(uri.strip())
    if parts.scheme.lower() != "agor" or parts.netloc.lower() != "kb":
        return None
    head, _, rest = parts.path.lstrip("/").partition("/")
    if head.lower() == "document" and rest:
        try:
            return document_link(UUID(unquote(rest).strip("/")), parts.fragment)
        except ValueError:
            pass  # like the original product: a path in a namespace literally named "document"
    namespace = unquote(head)
    path = _clean_path(unquote(rest))
    if not SLUG.match(namespace) or path is None:
        return None
    return reader_path(namespace, path, parts.fragment)


def _legacy_reader_link(href: str) -> str | None:
    """`/knowledge/<ns>/<path>` and `/kb/<ns>/<path>` (the original product's routes)."""
    parts = urlsplit(href)
    segments = parts.path.split("/", 3)  # "", prefix, namespace, path
    if len(segments) != 4 or segments[1] not in ("kb", "knowledge"):
        return None
    namespace = unquote(segments[2])
    if (segments[1] == "kb" and namespace in API_SEGMENTS) or not SLUG.match(namespace):
        return None
    path = _clean_path(unquote(segments[3]))
    return reader_path(namespace, path, parts.fragment) if path else None


def _relative_link(href: str, namespace: str, path: str) -> str | None:
    """`setup.md`, `./setup.md`, `../guides/setup.md#x` relative to the document's folder."""
    parts = urlsplit(href)
    if parts.netloc or not parts.path:
        return None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), unquote(parts.path)))
    if joined == ".." or joined.startswith("../") or joined == ".":
        return None
    target = _clean_path(joined)
    return reader_path(namespace, target, parts.fragment) if target else None


def rewrite_href(href: str, namespace: str | None = None, path: str | None = None) -> str | None:
    """The href a rendered link should carry; None drops it (for example an unknown `agor:` URI)."""
    text = href.strip()
    if text.lower().startswith("agor:"):
        return agor_to_reader(text)
    if text.startswith(("/kb/", "/knowledge/")):
        return _legacy_reader_link(text) or text
    if namespace and path and not text.startswith(("/", "#", "?")) and not SCHEME.match(text):
        return _relative_link(text, namespace, path) or text
    return text


def resolve_document_links(html: str, targets: Mapping[str, str]) -> str:
    """Point `/ui/doc/<id>` links at current reader paths; `targets` maps id -> path URL.

    Only ids the reader may see belong in `targets`; other links keep the id route (which
    answers 404 to them), so a private document's path never shows up in someone's page.
    """
    if not targets:
        return html

    def swap(match: re.Match[str]) -> str:
        url = targets.get(match.group(1))
        if url is None:
            return match.group(0)
        return f'href="{escape(url, quote=True)}{match.group(2) or ""}"'

    return DOCUMENT_HREF.sub(swap, html)


# --- markdown extensions -------------------------------------------------------------------


_FORMATTER = HtmlFormatter(cssclass="highlight", wrapcode=True)


@lru_cache(maxsize=512)
def _lexer(language: str) -> Lexer | None:
    try:
        return get_lexer_by_name(language)
    except ClassNotFound:
        return None


def _plain_code(source: str) -> str:
    return f'<div class="highlight"><pre><code>{escape(source, quote=False)}</code></pre></div>'


@lru_cache(maxsize=HIGHLIGHT_CACHE_BLOCKS)
def _highlight_small(source: str, language: str) -> str:
    return highlight(source, _lexer(language), _FORMATTER)


def code_fence(source: str, language: str, class_name: str, options: Any, md: Any, **kwargs: Any) -> str:
    """Any fenced code block: Pygments with a shared formatter and cached lexers.

    Highlighting is most of a code-heavy render, and an edit to a large document leaves most of
    its blocks as they were, so small blocks are remembered per process.
    """
    language = language.lower() if language else ""
    lexer = _lexer(language) if language else None
    if lexer is None or len(source) > HIGHLIGHT_MAX_CHARS:
        return _plain_code(source)
    if len(source) <= HIGHLIGHT_CACHE_MAX_CHARS:
        return _highlight_small(source, language)
    return highlight(source, lexer, _FORMATTER)


def mermaid_fence(source: str, language: str, class_name: str, options: Any, md: Any, **kwargs: Any) -> str:
    """The diagram source as escaped text; mermaid (strict) draws it in the browser."""
    if len(source) > MERMAID_MAX_CHARS:
        return _plain_code(source)
    return f'<pre class="mermaid">{escape(source, quote=False)}</pre>'


def math_fence(source: str, language: str, class_name: str, options: Any, md: Any, **kwargs: Any) -> str:
    return f'<div class="arithmatex">\\[{escape(source, quote=False)}\\]</div>'


class InlineDisplayMath(InlineProcessor):
    """`$$...$$` inside a paragraph: display math (arithmatex only knows it as a block)."""

    def handleMatch(self, m: re.Match[str], data: str) -> tuple[Element, int, int]:  # noqa: N802
        element = Element("span", {"class": "arithmatex"})
        element.text = AtomicString(f"\\[{m.group(1)}\\]")
        return element, m.start(0), m.end(0)


class ReaderTreeprocessor(Treeprocessor):
    """Reader links, table alignment as classes, heading ids with permalinks, referenced ids.

    Heading ids are slugs of the heading text, made unique (`_1`, `_2`, ...); the sanitizer
    prefixes them with `user-content-` (and in-page `#links` with them).
    """

    def run(self, root: Element) -> None:
        namespace, path = getattr(self.md, "kb_base", (None, None))
        referenced: set[str] = set()
        headings: list[Element] = []
        used_ids: set[str] = set()
        for element in root.iter():
            tag = element.tag
            if tag == "a":
                href = element.get("href")
                if href is None:
                    continue
                target = rewrite_href(href, namespace, path)
                if target is None:
                    del element.attrib["href"]
                    continue
                element.set("href", target)
                if target.startswith(DOCUMENT_LINK_PREFIX):
                    referenced.add(target[len(DOCUMENT_LINK_PREFIX) :].split("#", 1)[0])
            elif tag in ("td", "th"):
                found = ALIGNMENT.search(element.attrib.pop("style", ""))
                if found:
                    element.set("class", f"align-{found.group(1)}")
            elif tag in HEADING_TAGS:
                headings.append(element)
        found_headings: list[Heading] = []
        counters: dict[str, int] = {}
        for element in headings:
            text = html_unescape(HTML_PLACEHOLDER_RE.sub("", _UNESCAPE.unescape("".join(element.itertext()))))
            text = " ".join(text.split())
            anchor = unique(slugify_unicode(text, "-") or "section", used_ids, counters)
            element.set("id", anchor)
            permalink = SubElement(element, "a", {"class": "headerlink", "href": f"#{anchor}"})
            permalink.text = "¶"
            found_headings.append(Heading(level=int(element.tag[1]), id=ID_PREFIX + anchor, text=text))
        self.md.kb_document_ids = referenced
        self.md.kb_headings = found_headings


# What each inline pattern cannot match without (a necessary condition, checked before trying it).
PATTERN_NEEDS = {
    "backtick": re.compile(r"`"),
    "arithmatex-inline": re.compile(r"\$|\\\("),
    "kb-display-math": re.compile(r"\$\$"),
    "escape": re.compile(r"\\"),
    "reference": re.compile(r"\["),
    "link": re.compile(r"\["),
    "image_link": re.compile(r"!\["),
    "image_reference": re.compile(r"!\["),
    "short_reference": re.compile(r"\["),
    "short_image_ref": re.compile(r"!\["),
    "autolink": re.compile(r"<"),
    "automail": re.compile(r"<"),
    "linebreak": re.compile(r"  \n"),
    "html": re.compile(r"<"),
    "entity": re.compile(r"&"),
    "em_strong": re.compile(r"[*_~]"),
    "delimiter": re.compile(r"[*_~]"),
    "magic-link": re.compile(r"://|www\.", re.IGNORECASE),
    "magic-mail": re.compile(r"@"),
}
BRACKET_PATTERNS = ("reference", "link", "image_link", "image_reference", "short_reference", "short_image_ref")
BRACKET_TOKEN = re.compile(r"\]\(|[\[\]()]")
# Python-Markdown rescans from every `[` (and every `](`) to its partner or to the end of the text,
# six patterns over: unmatched brackets make that quadratic. Past this many characters of
# scanning per document, bracket-heavy text is shown without link parsing instead.
BRACKET_SCAN_BUDGET = 2_000_000
# Python-Markdown spends 15-50 µs per inline element. Trigger characters are weighted by what
# they cost (10-15 µs a unit); past the budget a document's remaining text is shown without
# inline markup, so 1 MiB of dense markup renders in about a second. 1 MiB of this project's
# README weighs about 48 000 units and renders in full.
INLINE_TRIGGER_WEIGHTS = {"@": 4, "[": 3, "<": 2, "  \n": 2, "://": 3, "www.": 3}
INLINE_TRIGGER_BUDGET = 80_000
# Python-Markdown looks for raw HTML blocks by running `html.parser` over the whole text outside
# fenced code, about 10 µs a tag (1 MiB of pasted HTML took 1.2 s). Past this many `<` that scan is
# skipped: the tags are still handled inline and sanitized, but block-level HTML is not kept whole.
RAW_HTML_BLOCK_SCAN_MAX_TAGS = 20_000


def bracket_scan_cost(data: str) -> int:
    """Characters the link patterns would scan: from each `[` / `](` to its partner or the end."""
    squares: list[int] = []
    parens: list[tuple[int, bool]] = []
    cost = 0
    for match in BRACKET_TOKEN.finditer(data):
        token, position = match.group(), match.start()
        if token == "[":
            squares.append(position)
        elif token[0] == "]":
            if squares:
                cost += position - squares.pop()
            if token == "](":
                parens.append((position, True))
        elif token == "(":
            parens.append((position, False))
        elif parens:
            start, is_link = parens.pop()
            if is_link:
                cost += position - start
    end = len(data)
    return cost + sum(end - p for p in squares) + sum(end - p for p, is_link in parens if is_link)


class FastInlineTreeprocessor(InlineTreeprocessor):
    """Python-Markdown's inline pass with three guards; renders what the stock pass renders.

    - Text that no pattern can match (most table cells, list items, sentences) is left as is.
    - A pattern is only tried when the text holds what it needs (see PATTERN_NEEDS).
    - Bracket-heavy text past the document's BRACKET_SCAN_BUDGET skips link parsing, which
      would otherwise take quadratic time (16 KB of `[x ` took 7 s).
    - Past INLINE_TRIGGER_BUDGET the rest of the document's text stays plain (`degraded`).
    """

    def __init__(self, md: markdown.Markdown) -> None:
        super().__init__(md)
        self._needs: dict[int, re.Pattern[str]] = {}
        self._bracket_patterns: set[int] = set()
        self._skip_brackets = False
        self.reset_budgets()

    def reset_budgets(self) -> None:
        self.bracket_budget = BRACKET_SCAN_BUDGET
        self.trigger_budget = INLINE_TRIGGER_BUDGET
        self.degraded = False

    def bind_patterns(self) -> None:
        """Map the registered pattern objects to their needs (after every extension registered)."""
        names = {item.name for item in self.md.inlinePatterns._priority}
        self._needs = {id(self.md.inlinePatterns[n]): need for n, need in PATTERN_NEEDS.items() if n in names}
        self._bracket_patterns = {id(self.md.inlinePatterns[n]) for n in BRACKET_PATTERNS if n in names}

    def _InlineProcessor__handleInline(self, data: str, patternIndex: int = 0) -> str:  # noqa: N802, N803
        if isinstance(data, AtomicString):
            return data
        if patternIndex == 0:
            if INLINE_TRIGGER.search(data) is None:
                return data
            weights = INLINE_TRIGGER_WEIGHTS
            self.trigger_budget -= sum(weights.get(found.lower(), 1) for found in INLINE_TRIGGER.findall(data))
            if self.trigger_budget < 0:
                self.degraded = True
                return data
            self._skip_brackets = False
            if "[" in data:
                cost = bracket_scan_cost(data)
                if cost > self.bracket_budget:
                    self._skip_brackets = self.degraded = True
                else:
                    self.bracket_budget -= cost
        index, start_index = patternIndex, 0
        count = len(self.inlinePatterns)
        while index < count:
            pattern = self.inlinePatterns[index]
            key = id(pattern)
            if start_index == 0:
                need = self._needs.get(key)
                if (need is not None and need.search(data) is None) or (
                    self._skip_brackets and key in self._bracket_patterns
                ):
                    index += 1
                    continue
            data, matched, start_index = self._InlineProcessor__applyPattern(pattern, data, index, start_index)
            if not matched:
                index += 1
        return data


class BoundedHtmlBlockPreprocessor(Preprocessor):
    """Python-Markdown's raw-HTML block pass, skipped (and the render marked degraded) past
    RAW_HTML_BLOCK_SCAN_MAX_TAGS tags."""

    def __init__(self, md: markdown.Markdown, stock: Preprocessor) -> None:
        super().__init__(md)
        self.stock = stock
        self.skipped = False

    def run(self, lines: list[str]) -> list[str]:
        if sum(line.count("<") for line in lines) > RAW_HTML_BLOCK_SCAN_MAX_TAGS:
            self.skipped = True
            return lines
        return self.stock.run(lines)


def _linear_reassemble(self: Any, lines: list[str]) -> list[str]:
    """SuperFences' reassemble, without rebuilding the whole line list once per fence."""
    if not self.stack:
        return lines
    out: list[str] = []
    position = 0
    for fenced, start, end in self.stack:  # pushed in document order, never overlapping
        out.extend(lines[position:start])
        out.append(fenced)
        position = end
    out.extend(lines[position:])
    self.stack = []
    return out


class ReaderExtension(Extension):
    """Reader links, inline display math and the speedups; must be the last extension."""

    def extendMarkdown(self, md: markdown.Markdown) -> None:  # noqa: N802
        md.registerExtension(self)
        md.kb_reader = self
        pattern = r"(?<!\\)\$\$(?!\s)((?:\\.|[^\\$\x02\x03])+?)(?<!\s)\$\$"
        md.inlinePatterns.register(InlineDisplayMath(pattern, md), "kb-display-math", 189.95)
        self.inline = FastInlineTreeprocessor(md)
        self.inline.bind_patterns()
        md.treeprocessors.register(self.inline, "inline", 20)
        fences = md.preprocessors["fenced_code_block"]
        fences.reassemble = types.MethodType(_linear_reassemble, fences)
        self.html_blocks = BoundedHtmlBlockPreprocessor(md, md.preprocessors["html_block"])
        md.preprocessors.register(self.html_blocks, "html_block", 20)
        # After inline patterns (20) and task lists (25), before unescaping (0).
        md.treeprocessors.register(ReaderTreeprocessor(md), "kb-reader", 15)

    def reset(self) -> None:
        self.inline.reset_budgets()
        self.html_blocks.skipped = False

    @property
    def degraded(self) -> bool:
        return self.inline.degraded or self.html_blocks.skipped


def _new_markdown() -> markdown.Markdown:
    return markdown.Markdown(
        extensions=[
            "tables",
            "pymdownx.superfences",
            "pymdownx.tasklist",
            "pymdownx.tilde",
            "pymdownx.arithmatex",
            "pymdownx.magiclink",
            ReaderExtension(),
        ],
        extension_configs={
            "pymdownx.superfences": {
                "custom_fences": [
                    {"name": "*", "class": "highlight", "format": code_fence},
                    {"name": "mermaid", "class": "mermaid", "format": mermaid_fence},
                    {"name": "math", "class": "arithmatex", "format": math_fence},
                ],
            },
            "pymdownx.tasklist": {"custom_checkbox": False, "clickable_checkbox": False},
            "pymdownx.tilde": {"subscript": False},
            "pymdownx.arithmatex": {"generic": True},
            "pymdownx.magiclink": {"hide_protocol": False, "repo_url_shortener": False},
        },
        output_format="html",
    )


_local = threading.local()


def _markdown() -> markdown.Markdown:
    """One Markdown instance per thread (they are not thread-safe), reset before each use."""
    md = getattr(_local, "md", None)
    if md is None:
        md = _local.md = _new_markdown()
    return md.reset()


# --- entry points --------------------------------------------------------------------------


def render_markdown(content: str, *, namespace: str | None = None, path: str | None = None) -> Rendered:
    """Render and sanitize; `namespace` and `path` anchor relative links. Not cached."""
    md = _markdown()
    md.kb_base = (namespace, path)
    html = sanitize_html(md.convert(content or ""))
    return Rendered(
        html=html,
        headings=tuple(getattr(md, "kb_headings", ())),
        document_ids=frozenset(getattr(md, "kb_document_ids", ())),
        degraded=md.kb_reader.degraded,
    )


def render_cached(content: str, *, namespace: str | None = None, path: str | None = None) -> Rendered:
    """`render_markdown` behind the cache, keyed by the renderer version and the inputs."""
    digest = hashlib.sha256(
        "\x00".join((RENDERER_VERSION, namespace or "", path or "", content or "")).encode("utf-8", "surrogatepass")
    ).hexdigest()
    key = f"kb:render:{digest}"
    hit = cache.get(key)
    if isinstance(hit, Rendered):
        return hit
    rendered = render_markdown(content, namespace=namespace, path=path)
    if len(rendered.html) <= CACHE_MAX_HTML_CHARS:
        cache.set(key, rendered, CACHE_TIMEOUT)
    return rendered


def readable_targets(actor: Actor, document_ids: frozenset[str] | set[str]) -> dict[str, str]:
    """Current reader paths of the linked documents this actor may read (active ones only)."""
    from knowledge import selectors

    if not document_ids:
        return {}
    filters = selectors.DocumentFilters(include_other_user_drafts=True)
    rows = (
        selectors.document_list(actor=actor, filters=filters)
        .filter(pk__in=[UUID(value) for value in document_ids])
        .values_list("id", "namespace__slug", "path")
    )
    return {str(doc_id): reader_path(slug, path) for doc_id, slug, path in rows}


def render_for_reader(
    *, actor: Actor, document: Document, version: int | str | None = None
) -> tuple[DocumentVersion, Rendered]:
    """A readable version of a document (the current one by default) as this actor sees it.

    Same access rules as reading the document; document links point at current paths where
    the actor may follow them. This is what `GET /kb/documents/{id}/html` should answer.
    """
    from knowledge import selectors

    current = document.current_version
    if version is None or str(version) in ("", str(current.number)):
        chosen = selectors.version_get(actor=actor, document=document, version=current.number)
    else:
        chosen = selectors.version_get(actor=actor, document=document, version=version)
    rendered = render_cached(chosen.content, namespace=document.namespace.slug, path=document.path)
    html = resolve_document_links(rendered.html, readable_targets(actor, rendered.document_ids))
    return chosen, replace(rendered, html=html)


def pygments_css() -> str:
    """The stylesheet for highlighted code (also shipped as static/knowledge/pygments.css)."""
    return _FORMATTER.get_style_defs(".highlight")
