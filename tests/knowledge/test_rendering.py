"""Markdown rendering features, link rewriting, the sanitizer and an XSS corpus (catalogue B, C07)."""

from __future__ import annotations

import random
import re
import unicodedata
from html.parser import HTMLParser

import pytest

from knowledge import rendering
from knowledge.rendering import render_cached, render_markdown, resolve_document_links, rewrite_href
from knowledge.sanitize import sanitize_html

DOC_ID = "0a3c5e7f-1234-4abc-8def-0123456789ab"


# --- a tiny DOM summary for assertions -----------------------------------------------------


class Collector(HTMLParser):
    """Records every start tag with its (entity-decoded) attributes, and text inside tags."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.stack: list[str] = []
        self.children_of_inert: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if any(t in ("pre-mermaid", "math") for t in self.stack):
            self.children_of_inert.append(tag)
        self.tags.append((tag, attributes))
        classes = attributes.get("class", "").split()
        if tag == "pre" and "mermaid" in classes:
            self.stack.append("pre-mermaid")
        elif "arithmatex" in classes:
            self.stack.append("math")
        elif tag not in ("br", "img", "input", "hr", "wbr"):
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {name: value or "" for name, value in attrs}))

    def handle_endtag(self, tag: str) -> None:
        if self.stack:
            self.stack.pop()


def parse(html: str) -> Collector:
    collector = Collector()
    collector.feed(html)
    collector.close()
    return collector


def tags_named(html: str, name: str) -> list[dict[str, str]]:
    return [attrs for tag, attrs in parse(html).tags if tag == name]


SAFE_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "dd", "del", "details", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "input", "ins", "kbd", "li", "mark", "ol", "p", "pre",
    "q", "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th",
    "thead", "tr", "ul", "var", "wbr",
}  # fmt: skip
SAFE_ATTRIBUTES = {"href", "title", "src", "alt", "width", "height", "start", "colspan", "rowspan", "checked",
                   "disabled", "type", "class", "id", "rel"}  # fmt: skip


def _squash(value: str) -> str:
    """What a browser might read as a scheme: lowercase, without controls, spaces or invisibles."""
    return "".join(ch for ch in value.lower() if unicodedata.category(ch)[0] not in "CZ" and not ch.isspace())


def assert_safe(html: str) -> None:
    """Nothing executable survives: tags, attributes, URLs, ids, inert diagram and math text."""
    collector = parse(html)
    for tag, attrs in collector.tags:
        assert tag in SAFE_TAGS, f"unexpected <{tag}> in {html!r}"
        for name, value in attrs.items():
            assert name in SAFE_ATTRIBUTES, f"unexpected attribute {name}= on <{tag}> in {html!r}"
            assert not name.startswith("on")
            squashed = _squash(value)
            if name in ("href", "src"):
                assert not re.match(r"^(javascript|vbscript|data|agor|file|blob):", squashed) or (
                    tag == "img" and re.match(r"^data:image/(png|gif|jpeg|webp);base64,", squashed)
                ), f"unsafe URL {value!r} in {html!r}"
                scheme = re.match(r"^([a-z][a-z0-9+.\-]*):", value.strip().lower())
                assert scheme is None or scheme.group(1) in ("http", "https", "mailto", "data")
            if name == "id":
                assert value.startswith("user-content-")
            if name == "type":
                assert tag == "input" and value == "checkbox"
        if tag == "input":
            assert "disabled" in attrs
        if tag == "a":
            assert attrs.get("rel") == "noopener noreferrer"
    assert collector.children_of_inert == [], f"markup inside mermaid/math source: {html!r}"
    assert not re.search(r"<\s*script", html, re.IGNORECASE)


# --- features -------------------------------------------------------------------------------


def test_gfm_tables_align_with_classes_not_styles():
    html = render_markdown("| a | b | c |\n|:--|:-:|--:|\n| 1 | 2 | 3 |\n").html
    assert "<table>" in html
    assert [attrs.get("class") for attrs in tags_named(html, "th")] == ["align-left", "align-center", "align-right"]
    assert "style" not in html


def test_task_lists_are_disabled_checkboxes():
    html = render_markdown("- [x] done\n- [ ] todo\n").html
    boxes = tags_named(html, "input")
    assert len(boxes) == 2
    assert all(box["type"] == "checkbox" and "disabled" in box for box in boxes)
    assert "checked" in boxes[0] and "checked" not in boxes[1]
    assert 'class="task-list"' in html and 'class="task-list-item"' in html


def test_strikethrough_and_bare_links():
    html = render_markdown("~~gone~~ and https://example.com/x and www.example.org").html
    assert "<del>gone</del>" in html
    assert '<a href="https://example.com/x" rel="noopener noreferrer">' in html
    assert 'href="http://www.example.org"' in html


def test_fenced_code_is_highlighted_by_pygments():
    html = render_markdown('```python\ndef f(x):\n    return "<b>"\n```\n').html
    assert html.startswith('<div class="highlight"><pre>')
    assert '<span class="k">def</span>' in html
    assert "&lt;b&gt;" in html and "<b>" not in html


def test_highlighted_blocks_are_reused_per_language():
    rendering._highlight_small.cache_clear()
    source = 'def f(x):\n    return "<b>"\n'
    first = render_markdown(f"```python\n{source}```\n").html
    again = render_markdown(f"Edited above.\n\n```Python\n{source}```\n").html
    as_text = render_markdown(f"```text\n{source}```\n").html
    assert rendering._highlight_small.cache_info().hits == 1
    assert first in again
    assert '<span class="k">def</span>' in first and '<span class="k">' not in as_text


def test_unknown_language_and_plain_fences_are_escaped_code():
    html = render_markdown("```nosuchlanguage\n<script>alert(1)</script>\n```\n").html
    assert html.startswith('<div class="highlight"><pre><code>')
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert_safe(html)


def test_mermaid_fence_is_inert_source_text():
    source = 'graph TD\n  A["<img src=x onerror=alert(1)>"] --> B\n  click A "javascript:alert(2)"'
    html = render_markdown(f"```mermaid\n{source}\n```\n").html
    assert html.startswith('<pre class="mermaid">graph TD')
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "--&gt; B" in html
    assert_safe(html)


def test_oversized_mermaid_is_shown_as_code(monkeypatch):
    monkeypatch.setattr(rendering, "MERMAID_MAX_CHARS", 20)
    html = render_markdown("```mermaid\ngraph TD; A-->B; B-->C; C-->D\n```\n").html
    assert 'class="mermaid"' not in html and '<div class="highlight">' in html


def test_math_inline_display_and_fence():
    html = render_markdown("Inline $x^2$ and $$\\sum_i i$$ here.\n\n$$\na < b\n$$\n\n```math\nE=mc^2\n```\n").html
    assert '<span class="arithmatex">\\(x^2\\)</span>' in html
    assert '<span class="arithmatex">\\[\\sum_i i\\]</span>' in html
    assert '<div class="arithmatex">\\[\na &lt; b\n\\]</div>' in html
    assert '<div class="arithmatex">\\[E=mc^2\\]</div>' in html
    assert_safe(html)


def test_prices_are_not_math():
    assert "arithmatex" not in render_markdown("It costs $5 and $10.").html


def test_heading_ids_are_prefixed_unique_and_linked():
    rendered = render_markdown("# Setup\n\n## Setup\n\n## constructor\n\n[jump](#setup)\n")
    ids = [attrs["id"] for attrs in tags_named(rendered.html, "h1") + tags_named(rendered.html, "h2")]
    assert ids == ["user-content-setup", "user-content-setup_1", "user-content-constructor"]
    assert 'href="#user-content-setup"' in rendered.html  # the in-page link follows the prefix
    assert '<a class="headerlink" href="#user-content-setup"' in rendered.html
    assert [(h.level, h.id, h.text) for h in rendered.headings] == [
        (1, "user-content-setup", "Setup"),
        (2, "user-content-setup_1", "Setup"),
        (2, "user-content-constructor", "constructor"),
    ]


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        (f"agor://kb/document/{DOC_ID}", f"/ui/doc/{DOC_ID}"),
        (f"AGOR://KB/Document/{DOC_ID.upper()}", f"/ui/doc/{DOC_ID}"),
        (f"agor://kb/document/{{{DOC_ID}}}", f"/ui/doc/{DOC_ID}"),
        (f"agor://kb/document/{DOC_ID.replace('-', '')}/", f"/ui/doc/{DOC_ID}"),
        (f"agor://kb/document/{DOC_ID}?v=3#Intro", f"/ui/doc/{DOC_ID}#Intro"),
        ("agor://kb/eng/guides/setup.md", "/ui/kb/eng/guides/setup.md"),
        ("agor://kb/eng/guides/my%20doc.md#part", "/ui/kb/eng/guides/my%20doc.md#part"),
        ("agor://kb/document/not-a-uuid", "/ui/kb/document/not-a-uuid"),
        ("agor://kb/eng/../../etc/passwd", None),
        ("agor://kb/Bad_Slug!/x.md", None),
        ("agor://kb/unit/abc", "/ui/kb/unit/abc"),
        ("agor://elsewhere/x", None),
        ("agor:alert(1)", None),
        ("../guides/setup.md", "/ui/kb/eng/guides/setup.md"),
        ("./sibling.md#top", "/ui/kb/eng/notes/sibling.md#top"),
        ("sibling", "/ui/kb/eng/notes/sibling"),
        ("../../../outside.md", "../../../outside.md"),
        ("/knowledge/eng/a.md", "/ui/kb/eng/a.md"),
        ("/kb/eng/a.md", "/ui/kb/eng/a.md"),
        ("/kb/documents/123", "/kb/documents/123"),
        ("https://example.com/x", "https://example.com/x"),
        ("#local", "#local"),
    ],
)
def test_rewrite_href(href: str, expected: str | None):
    assert rewrite_href(href, "eng", "notes/today.md") == expected


def test_document_links_are_collected_and_resolved_to_current_paths():
    rendered = render_markdown(
        f"[a](agor://kb/document/{DOC_ID}#Setup) [b](agor://kb/document/{DOC_ID.upper()})"
        " [c](agor://kb/document/11111111-2222-4333-8444-555555555555)",
        namespace="eng",
        path="a.md",
    )
    assert rendered.document_ids == {DOC_ID, "11111111-2222-4333-8444-555555555555"}
    resolved = resolve_document_links(rendered.html, {DOC_ID: "/ui/kb/eng/new%20name.md"})
    assert 'href="/ui/kb/eng/new%20name.md#Setup"' in resolved
    assert resolved.count('href="/ui/kb/eng/new%20name.md') == 2
    # A target the reader may not see keeps the id route (which answers 404 to them).
    assert 'href="/ui/doc/11111111-2222-4333-8444-555555555555"' in resolved
    assert "agor:" not in resolved


def test_raw_html_agor_links_never_reach_the_page():
    html = render_markdown(f'<a href="agor://kb/document/{DOC_ID}">raw</a>').html
    assert "agor:" not in html


def test_render_cached_reuses_the_result(monkeypatch):
    content = "# Cached\n\nBody " + str(random.random())
    first = render_cached(content, namespace="eng", path="a.md")
    monkeypatch.setattr(rendering, "render_markdown", lambda *a, **k: pytest.fail("not cached"))
    assert render_cached(content, namespace="eng", path="a.md") == first


def _realistic_document(size: int) -> str:
    """Prose, headings, lists, links, tables, code and math, as long documents tend to be."""
    rng = random.Random(4)
    words = ["the", "service", "stores", "documents", "in", "namespaces", "and", "keeps", "every", "version"]
    parts: list[str] = []
    total = 0
    section = 0
    while total < size:
        section += 1
        chunk = [f"## Section {section}\n\n"]
        for _ in range(3):
            chunk.append(" ".join(rng.choice(words) for _ in range(70)) + ".\n\n")
        chunk.append(f"- item with **bold** and `code`\n- [link](../other/page-{section}.md)\n- [ ] a task\n\n")
        if section % 4 == 0:
            chunk.append("```python\nfor i in range(10):\n    print(i * 2)\n```\n\n")
        if section % 6 == 0:
            chunk.append("| key | value |\n|-----|------:|\n| a | 1 |\n| b | 2 |\n\n")
        if section % 8 == 0:
            chunk.append("Energy is $E = mc^2$ here.\n\n")
        text = "".join(chunk)
        parts.append(text)
        total += len(text)
    return "".join(parts)[:size]


def test_a_realistic_mebibyte_renders_whole_without_degrading():
    """The budgets never cut an ordinary large document short (its timing is in `make bench`)."""
    content = _realistic_document(1024 * 1024)
    rendered = render_markdown(content, namespace="eng", path="big.md")
    last_section = re.findall(r"^## (Section \d+)$", content, flags=re.M)[-2]
    assert not rendered.degraded
    assert f'>{last_section}<a class="headerlink"' in rendered.html
    assert rendered.html.count("<table>") == content.count("| key | value |")
    assert rendered.html.count('class="arithmatex"') == content.count("$E = mc^2$")


# --- sanitizer --------------------------------------------------------------------------------


def test_sanitizer_keeps_safe_images_and_drops_others():
    png = "data:image/png;base64,iVBORw0KGgo="
    html = sanitize_html(
        f'<img src="{png}" alt="a"><img src="data:image/svg+xml;base64,PHN2Zz4="><img src="https://x.example/t.png">'
        '<img src="/static/x.png"><img src="//evil.example/x.png"><a href="data:image/png;base64,AAAA">l</a>'
    )
    images = tags_named(html, "img")
    assert [img.get("src") for img in images] == [png, None, None, "/static/x.png", None]
    assert tags_named(html, "a")[0].get("href") is None


def test_sanitizer_is_idempotent_on_rendered_output():
    html = render_markdown("# T\n\n| a |\n|:-:|\n| b |\n\n```python\nx = 1\n```\n\n- [x] y\n\n$a$\n").html
    assert sanitize_html(html) == html


# --- XSS corpus: security catalogue group B (and C07) ------------------------------------------

XSS_CORPUS: list[tuple[str, str]] = [
    # B01 raw dangerous elements
    ("script", "<script>alert(1)</script>"),
    ("script-upper", "<SCRIPT SRC=//evil.example/x.js></SCRIPT>"),
    ("script-split", "<scr<script>ipt>alert(1)</scr</script>ipt>"),
    ("iframe-srcdoc", '<iframe srcdoc="<script>alert(1)</script>"></iframe>'),
    ("object", '<object data="javascript:alert(1)"></object>'),
    ("embed", '<embed src="javascript:alert(1)">'),
    ("base", '<base href="javascript:alert(1)//">'),
    ("form", '<form action="javascript:alert(1)"><button formaction="javascript:alert(2)">x</button></form>'),
    ("meta-refresh", '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">'),
    ("link-import", '<link rel="import" href="//evil.example">'),
    ("template", "<template><script>alert(1)</script></template>"),
    ("noscript-mxss", '<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>'),
    ("style-element", "<style>body{background:url(javascript:alert(1))}</style>"),
    ("comment-trick", "<!--><script>alert(1)</script>-->"),
    ("cdata", "<![CDATA[<script>alert(1)</script>]]>"),
    # event handlers
    ("img-onerror", "<img src=x onerror=alert(1)>"),
    ("svg-onload", "<svg onload=alert(1)>"),
    ("body-onload", "<body onload=alert(1)>"),
    ("details-ontoggle", "<details open ontoggle=alert(1)><summary>x</summary></details>"),
    ("div-onmouseover", '<div onmouseover="alert(1)">hover</div>'),
    ("input-onfocus", "<input autofocus onfocus=alert(1)>"),
    ("a-onclick", '<a href="https://ok.example" onclick="alert(1)">x</a>'),
    ("video-source", "<video><source onerror=alert(1)></video>"),
    ("marquee", "<marquee onstart=alert(1)>x</marquee>"),
    # B03 javascript: / vbscript: / data: URLs in markdown links
    ("md-javascript", "[x](javascript:alert(1))"),
    ("md-javascript-case", "[x](JaVaScRiPt:alert(1))"),
    ("md-javascript-tab", "[x](java&#x09;script:alert(1))"),
    ("md-javascript-entity", "[x](&#106;avascript:alert(1))"),
    ("md-javascript-hex-entity", "[x](&#x6A;&#x61;vascript:alert(1))"),
    ("md-javascript-nbsp", "[x](java\u00a0script:alert(1))"),
    ("md-javascript-zwsp", "[x](java\u200bscript:alert(1))"),
    ("md-javascript-leading", "[x](   javascript:alert(1))"),
    ("md-javascript-control", "[x](\x01javascript:alert(1))"),
    ("md-javascript-newline", "[x](<java\nscript:alert(1)>)"),
    ("md-vbscript", "[x](vbscript:msgbox(1))"),
    ("md-data-html", "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)"),
    ("md-data-image-svg", "![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)"),
    ("md-image-javascript", "![x](javascript:alert(1))"),
    ("md-file", "[x](file:///etc/passwd)"),
    ("html-a-javascript", '<a href="javascript:alert(1)">x</a>'),
    (
        "html-a-entity",
        '<a href="&#0000106&#0000097&#0000118&#0000097&#0000115&#0000099&#0000114&#0000105&#0000116'
        '&#0000101&#0000058alert(1)">x</a>',
    ),
    ("html-a-tab", '<a href="jav\tascript:alert(1)">x</a>'),
    ("html-a-newline", '<a href="jav&#x0A;ascript:alert(1)">x</a>'),
    ("html-img-vbscript", '<img src="vbscript:msgbox(1)">'),
    # B05 every link syntax
    ("reference-link", "[x][r]\n\n[r]: javascript:alert(1)"),
    ("reference-image", "![x][r]\n\n[r]: javascript:alert(1)"),
    ("autolink", "<javascript:alert(1)>"),
    ("autolink-vb", "<vbscript:msgbox(1)>"),
    ("link-title-breakout", '[x](https://ok.example "x\\" onclick=\\"alert(1)")'),
    ("link-title-quote", "[x](https://ok.example 'a\" onmouseover=\"alert(1)')"),
    ("link-href-quote", '[x](https://ok.example/"onmouseover="alert(1))'),
    ("image-alt-breakout", '![x" onerror="alert(1)](https://ok.example/x.png)'),
    # B07 SVG / MathML payloads
    ("svg-a", '<svg><a href="javascript:alert(1)"><text x="0" y="20">x</text></a></svg>'),
    ("svg-foreignobject", "<svg><foreignObject><iframe src=javascript:alert(1)></iframe></foreignObject></svg>"),
    ("svg-use", '<svg><use href="data:image/svg+xml;base64,PHN2ZyBpZD0neCc+PC9zdmc+#x"></use></svg>'),
    ("svg-animate", '<svg><a><animate attributeName=href values="javascript:alert(1)"/><text>x</text></a></svg>'),
    ("svg-set", '<svg><set attributeName="onmouseover" to="alert(1)"/></svg>'),
    ("svg-script", "<svg><script>alert(1)</script></svg>"),
    ("math-href", '<math><mtext><a href="javascript:alert(1)">x</a></mtext></math>'),
    (
        "math-maction",
        '<math><maction actiontype="statusline#http://x" xlink:href="javascript:alert(1)">x</maction></math>',
    ),
    # B09 attribute injection through markdown syntax and markdown-in-HTML
    ("attr-list-heading", '# T {: onclick="alert(1)" }'),
    ("attr-list-style", '# T {: style="position:fixed;inset:0" }'),
    ("md-in-html", '<div markdown="1" onclick="alert(1)">*x*</div>'),
    ("fence-attrs", '```{.python onclick="alert(1)" style="color:red"}\nx = 1\n```'),
    ("fence-attrs-mermaid", '```{.mermaid onclick="alert(1)"}\ngraph TD; A-->B\n```'),
    # style injection
    ("style-attr", '<p style="position:fixed;top:0;left:0;width:100%;height:100%">x</p>'),
    ("style-expression", '<div style="width: expression(alert(1))">x</div>'),
    ("style-url", '<span style="background:url(javascript:alert(1))">x</span>'),
    ("table-style", '<table><tr><td style="background:url(//evil.example)">x</td></tr></table>'),
    ("class-injection", '<div class="highlight copy-button evil">x</div><span class="arithmatex katex">y</span>'),
    # B11-ish: mermaid and math sources that try to break out
    ("mermaid-script-label", '```mermaid\ngraph TD\n  A["<script>alert(1)</script>"] --> B\n```'),
    ("mermaid-click", '```mermaid\ngraph TD\n  A --> B\n  click A "javascript:alert(1)"\n  click B call alert(2)\n```'),
    ("mermaid-init-directive", '```mermaid\n%%{init: {"securityLevel": "loose"}}%%\ngraph TD\n  A --> B\n```'),
    ("mermaid-closing-pre", "```mermaid\ngraph TD\n</pre><script>alert(1)</script>\n```"),
    ("math-closing-span", "$x</span><script>alert(1)</script>$"),
    ("math-href", "$\\href{javascript:alert(1)}{x}$"),
    ("math-html", "$$\\htmlClass{x}{y} \\url{javascript:alert(1)}$$"),
    ("math-block-break", "$$\n</div><img src=x onerror=alert(1)>\n$$"),
    # B13: macro bomb (client side cut by maxExpand; server side inert text)
    ("math-macro-bomb", "$$\\def\\a{\\a\\a}\\a$$"),
    # HTML entity tricks
    ("entity-lt", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ("entity-double", "&amp;lt;script&amp;gt;"),
    ("entity-in-attr", '<a href="https://ok.example" title="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;">x</a>'),
    ("entity-scheme-colon", '<a href="javascript&colon;alert(1)">x</a>'),
    ("entity-scheme-named-tab", '<a href="java&Tab;script:alert(1)">x</a>'),
    # B15 DOM clobbering
    ("clobber-id", '<a id="csrfmiddlewaretoken" name="csrfmiddlewaretoken">x</a>'),
    ("clobber-img-name", '<img name="body" src="/x.png">'),
    ("clobber-heading", '# location\n\n## __proto__\n\n<h2 id="document">raw</h2>'),
    ("clobber-form", '<form id="kb-links"><input name="dataset"></form>'),
    # B17 targets and protocol-relative links
    ("target-blank", '<a href="https://x.example" target="_blank">x</a>'),
    ("protocol-relative", "[x](//evil.example)"),
    # B19: titles and text are escaped, not markup
    ("title-breakout", '"><svg onload=alert(1)>'),
    # C07: agor links never reach the DOM raw
    ("agor-javascript", "[x](agor:javascript:alert(1))"),
    ("agor-raw-html", '<a href="agor://kb/document/0a3c5e7f-1234-4abc-8def-0123456789ab">x</a>'),
    ("agor-path-traversal", "[x](agor://kb/eng/%2e%2e/%2e%2e/admin)"),
    # mixed document
    (
        "everything",
        "# Hello <img src=x onerror=alert(1)>\n\n<script>alert(1)</script>\n\n[a](javascript:alert(1)) "
        '<a href="vbscript:x" onclick="y">b</a>\n\n```mermaid\ngraph TD; A["<b onmouseover=alert(1)>x</b>"]\n```\n'
        "\n$\\href{javascript:alert(1)}{x}$\n",
    ),
    # last: its unclosed <style> swallows whatever follows when the corpus is joined
    ("math-mxss", "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>"),
]


@pytest.mark.parametrize(("case", "payload"), XSS_CORPUS, ids=[case for case, _ in XSS_CORPUS])
def test_xss_corpus_nothing_survives(case: str, payload: str):
    html = render_markdown(payload, namespace="eng", path="notes/x.md").html
    assert_safe(html)
    assert sanitize_html(html) == html  # stable: a second pass finds nothing more to remove


@pytest.mark.parametrize(("case", "payload"), XSS_CORPUS, ids=[case for case, _ in XSS_CORPUS])
def test_xss_corpus_through_the_sanitizer_alone(case: str, payload: str):
    assert_safe(sanitize_html(payload))


def test_script_content_is_dropped_not_shown():
    html = render_markdown("<script>alert('x')</script><style>p{}</style>text").html
    assert "alert" not in html and "p{}" not in html and "text" in html


def test_heading_ids_never_clobber_globals():
    html = render_markdown('# location\n\n# document\n\n<h2 id="cookie">c</h2>').html
    ids = [attrs["id"] for tag, attrs in parse(html).tags if "id" in attrs]
    assert ids and all(value.startswith("user-content-") for value in ids)
    assert 'name="' not in html


def test_data_urls_allowed_only_as_safe_images():
    html = render_markdown(
        "![ok](data:image/png;base64,iVBORw0KGgo=) [no](data:image/png;base64,iVBORw0KGgo=) "
        "![svg](data:image/svg+xml;base64,PHN2Zz4=)"
    ).html
    assert [img.get("src") for img in tags_named(html, "img")] == ["data:image/png;base64,iVBORw0KGgo=", None]
    assert all("href" not in attrs for attrs in tags_named(html, "a"))


def test_corpus_covers_the_catalogue_groups():
    names = {case for case, _ in XSS_CORPUS}
    for needed in (
        "script",
        "img-onerror",
        "md-javascript",
        "md-vbscript",
        "md-data-html",
        "svg-a",
        "math-href",
        "mermaid-script-label",
        "entity-lt",
        "style-attr",
        "reference-link",
        "autolink",
        "clobber-id",
    ):
        assert needed in names


def test_speedups_do_not_change_the_output():
    """The fast inline pass and linear fence reassembly render exactly what stock Markdown does."""
    from pathlib import Path

    from markdown.treeprocessors import InlineProcessor

    stock = rendering._new_markdown()
    stock.treeprocessors.register(InlineProcessor(stock), "inline", 20)
    del stock.preprocessors["fenced_code_block"].reassemble  # back to SuperFences' own method
    fast = rendering._new_markdown()
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    samples = [payload for _, payload in XSS_CORPUS] + [
        _realistic_document(100_000),
        readme,
        "line one  \nline two\n\nmail a@b.co, escaped \\*x\\*, &copy; ~~gone~~ www.x.com ftp://f.org/x",
        "```python\na = 1\n```\n\ntext\n\n```\nplain\n```\n\n> ```js\n> quoted()\n> ```\n",
    ]
    for sample in samples:
        for md in (stock, fast):
            md.reset()
            md.kb_base = ("eng", "notes/a.md")
        assert fast.convert(sample) == stock.convert(sample), sample[:80]


@pytest.mark.django_db
def test_render_for_reader_follows_access_and_versions(make_member):
    from config.exceptions import NotFound
    from knowledge import services
    from knowledge.rendering import render_for_reader
    from workspaces import services as workspace_services

    alice, bob = make_member("member", username="alice"), make_member("member", username="bob")
    namespace = workspace_services.namespace_create(actor=alice.actor, slug="eng", others_can="read")
    target = services.document_create(actor=alice.actor, namespace=namespace, path="t.md", content="# T\n")
    private = services.document_create(
        actor=alice.actor, namespace=namespace, path="p.md", content="# P\n", visibility="private"
    )
    document = services.document_create(
        actor=alice.actor,
        namespace=namespace,
        path="d.md",
        content=f"v1 [t](agor://kb/document/{target.pk}) [p](agor://kb/document/{private.pk})",
    )
    services.document_revise(actor=alice.actor, document_id=document.pk, content="v2")
    document.refresh_from_db()
    version, rendered = render_for_reader(actor=bob.actor, document=document)
    assert version.number == 2 and "v2" in rendered.html
    version, rendered = render_for_reader(actor=bob.actor, document=document, version="1")
    assert version.number == 1
    assert 'href="/ui/kb/eng/t.md"' in rendered.html and f'href="/ui/doc/{private.pk}"' in rendered.html
    _, as_owner = render_for_reader(actor=alice.actor, document=document, version=1)
    assert 'href="/ui/kb/eng/p.md"' in as_owner.html
    with pytest.raises(NotFound):
        render_for_reader(actor=bob.actor, document=private)
    with pytest.raises(NotFound):
        render_for_reader(actor=bob.actor, document=document, version=7)


@pytest.mark.parametrize(
    "content",
    ["[" * 30_000, "[x " * 20_000, "[a](" * 20_000, "![" * 20_000, "[" * 10_000 + "]" * 10_000],
    ids=["brackets", "open-links", "open-hrefs", "images", "nested"],
)
def test_bracket_floods_skip_link_parsing(content: str, monkeypatch):
    """Python-Markdown rescans from every unmatched `[`: quadratic unless the budget stops it.

    Counted rather than timed: once the flood's scan cost is over budget, no link pattern runs
    on it at all (timings are in `make bench`).
    """
    assert rendering.bracket_scan_cost(content) > rendering.BRACKET_SCAN_BUDGET
    tried = []
    original = rendering.FastInlineTreeprocessor._InlineProcessor__applyPattern

    def counting(self, pattern, data, index, start_index=0):
        if id(pattern) in self._bracket_patterns:
            tried.append(pattern)
        return original(self, pattern, data, index, start_index)

    monkeypatch.setattr(rendering.FastInlineTreeprocessor, "_InlineProcessor__applyPattern", counting)
    rendered = render_markdown(content)
    assert rendered.degraded and tried == []
    assert "[" in rendered.html  # shown as text


def test_links_still_work_next_to_a_bracket_flood():
    rendered = render_markdown("[ok](https://ok.example) and [a](b)\n\n" + "[x " * 20_000)
    assert '<a href="https://ok.example" rel="noopener noreferrer">ok</a>' in rendered.html
    assert not rendered.degraded or "[x [x" in rendered.html


def test_inline_budget_leaves_the_rest_plain(monkeypatch):
    monkeypatch.setattr(rendering, "INLINE_TRIGGER_BUDGET", 50)
    paragraphs = "\n\n".join(f"para {i} with *emphasis* and `code`" for i in range(100))
    rendered = render_markdown(paragraphs)
    assert rendered.degraded
    assert "<em>emphasis</em>" in rendered.html  # the first paragraphs are formatted
    assert "para 99 with *emphasis* and `code`" in rendered.html  # the last are plain text
    assert_safe(rendered.html)
    monkeypatch.undo()
    assert not render_markdown(paragraphs).degraded


def test_dense_inline_markup_is_bounded():
    """1 MiB of emphasis (260 000 elements) would take 12 s; the budget keeps it to a few."""
    content = "\n\n".join(["*a* " * 500] * 520)
    rendered = render_markdown(content)
    assert rendered.degraded
    # The budget (about 2 units per `*`) formats the first paragraphs and leaves the rest plain.
    formatted = rendered.html.count("<em>a</em>")
    assert 0 < formatted <= rendering.INLINE_TRIGGER_BUDGET // 2 + 500
    assert rendered.html.count("*a*") >= 500 * 520 - formatted - 500


def test_raw_html_block_scan_is_bounded(monkeypatch):
    """Past the tag limit the raw-HTML block scan is skipped: inline tags are still sanitized
    and kept, the text is all there, and the render says it is degraded."""
    block = "<div>\nblock *text*\n</div>\n\n"
    inline = "Some <b>bold</b> and <script>alert(1)</script> text.\n\n"
    assert not render_markdown(block + inline).degraded
    assert "<div>\nblock *text*\n</div>" in render_markdown(block + inline).html  # kept whole, raw

    monkeypatch.setattr(rendering, "RAW_HTML_BLOCK_SCAN_MAX_TAGS", 3)
    rendered = render_markdown(block + inline + "```html\n" + "<p>code</p>\n" * 50 + "```\n")
    assert rendered.degraded
    assert "<em>text</em>" in rendered.html  # the block's text went through markdown instead
    assert "<b>bold</b>" in rendered.html
    assert_safe(rendered.html)

    # Tags inside fenced code do not count towards the limit: fences are set aside first.
    monkeypatch.setattr(rendering, "RAW_HTML_BLOCK_SCAN_MAX_TAGS", 10)
    assert not render_markdown(block + "```html\n" + "<p>code</p>\n" * 50 + "```\n").degraded
