"""The one place HTML is sanitized: nh3 (Rust ammonia) with an explicit allowlist.

Everything the renderer produces passes through `sanitize_html` before it reaches a page or an
API response. The rules, in short:

- Only the tags in `ALLOWED_TAGS` survive; `script`, `style` and friends lose their content too.
- No event handlers, no `style`, no `name`, no `target`: only the attributes listed per tag.
- URLs: `http`, `https` and `mailto`, plus relative URLs. `data:` only for `img src` and only
  base64 PNG, GIF, JPEG or WebP. Anything with control, format or whitespace characters smuggled
  into a scheme is dropped, as are external images (the reader pages' CSP would block them).
- `class` values come from fixed lists (Pygments tokens, task lists, math, mermaid, alignment).
- Heading ids get the `user-content-` prefix (no DOM clobbering) and in-page `#fragment` links
  follow them; links carry `rel="noopener noreferrer"`.
- `input` is always disabled and at most a checkbox (task lists).
"""

from __future__ import annotations

import re
import unicodedata

import nh3
from pygments.token import STANDARD_TYPES

ID_PREFIX = "user-content-"
LINK_REL = "noopener noreferrer"
URL_SCHEMES = frozenset({"http", "https", "mailto"})

HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
ALLOWED_TAGS = frozenset(
    {
        *HEADINGS,
        "a",
        "abbr",
        "b",
        "blockquote",
        "br",
        "caption",
        "code",
        "dd",
        "del",
        "details",
        "div",
        "dl",
        "dt",
        "em",
        "hr",
        "i",
        "img",
        "input",
        "ins",
        "kbd",
        "li",
        "mark",
        "ol",
        "p",
        "pre",
        "q",
        "s",
        "samp",
        "small",
        "span",
        "strong",
        "sub",
        "summary",
        "sup",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
        "var",
        "wbr",
    }
)
# Removed together with everything inside them (never in ALLOWED_TAGS).
CLEAN_CONTENT_TAGS = frozenset({"script", "style", "template", "iframe", "object", "embed", "noscript", "textarea"})

ALLOWED_ATTRIBUTES: dict[str, set[str]] = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title", "width", "height"},
    "abbr": {"title"},
    "ol": {"start"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan"},
    "input": {"checked"},
    **{heading: {"id"} for heading in HEADINGS},
}
# Restricted to exact values (these attributes must not also appear in ALLOWED_ATTRIBUTES).
ALLOWED_ATTRIBUTE_VALUES: dict[str, dict[str, set[str]]] = {"input": {"type": {"checkbox"}}}
# One forced attribute only: nh3 orders several forced attributes differently from run to run.
FORCED_ATTRIBUTES: dict[str, dict[str, str]] = {"input": {"disabled": ""}}

PYGMENTS_CLASSES = frozenset(value for value in STANDARD_TYPES.values() if value)
ALIGN_CLASSES = frozenset({"align-left", "align-center", "align-right"})
ALLOWED_CLASSES: dict[str, set[str]] = {
    "span": {*PYGMENTS_CLASSES, "arithmatex"},
    "div": {"highlight", "arithmatex"},
    "pre": {"mermaid"},
    "ul": {"task-list"},
    "ol": {"task-list"},
    "li": {"task-list-item"},
    "a": {"headerlink"},
    "td": set(ALIGN_CLASSES),
    "th": set(ALIGN_CLASSES),
}

URL_ATTRIBUTES = frozenset({"href", "src"})
SAFE_DATA_IMAGE = re.compile(r"^data:image/(?:png|gif|jpeg|webp);base64,[A-Za-z0-9+/=\s]*$", re.IGNORECASE)
SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]*):")
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp", "Co", "Cn"})


def _has_hidden_characters(value: str) -> bool:
    """Control, format (zero-width, bidi) or unusual space characters: no real URL needs them."""
    return any(ch != " " and unicodedata.category(ch) in INVISIBLE_CATEGORIES for ch in value)


def safe_url(tag: str, value: str) -> str | None:
    """The URL if it is allowed on this tag, else None. nh3 has already applied its scheme list."""
    stripped = value.strip()
    if not stripped or _has_hidden_characters(stripped):
        return None
    # Judge the scheme as a lenient browser might read it: lowercase, with whitespace removed.
    scheme_match = SCHEME.match(re.sub(r"\s+", "", stripped.lower()))
    if tag == "img":
        if scheme_match is None:
            return stripped if not stripped.startswith("//") else None
        return stripped if scheme_match.group(1) == "data" and SAFE_DATA_IMAGE.match(stripped) else None
    if scheme_match is not None and scheme_match.group(1) not in URL_SCHEMES:
        return None
    if stripped.startswith("#") and not stripped.startswith("#" + ID_PREFIX):
        # In-page anchors follow the prefixed heading ids.
        return "#" + ID_PREFIX + stripped[1:]
    return stripped


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    if attribute in URL_ATTRIBUTES:
        return safe_url(tag, value)
    return value


_CLEANER = nh3.Cleaner(
    tags=set(ALLOWED_TAGS),
    clean_content_tags=set(CLEAN_CONTENT_TAGS),
    attributes=ALLOWED_ATTRIBUTES,
    attribute_filter=_attribute_filter,
    strip_comments=True,
    link_rel=LINK_REL,
    tag_attribute_values=ALLOWED_ATTRIBUTE_VALUES,
    set_tag_attribute_values=FORCED_ATTRIBUTES,
    # `data` is let through here only so that the filter can keep safe inline images; the
    # filter drops it everywhere else.
    url_schemes={*URL_SCHEMES, "data"},
    allowed_classes=ALLOWED_CLASSES,
    id_prefix=ID_PREFIX,
)


def sanitize_html(html: str) -> str:
    """Return `html` with everything outside the allowlist removed."""
    return _CLEANER.clean(html)
