"""Link destinations -> documents.

`parse_destination` is pure: it turns one destination into a document id, a namespace + path,
an invalid link (it looks like a document link but cannot be one) or nothing (external URLs,
in-page anchors). `resolve_links` dedups a document's links and looks the targets up in a few
batched queries, inside the source's workspace only.

Accepted forms (query strings are dropped, the fragment is kept):
- `agor://kb/document/<uuid>` in any case, braces or `urn:uuid:` included;
- `agor://kb/<namespace>/<path>`;
- reader and app routes `/ui/kb/`, `/ui/knowledge/`, `/kb/`, `/knowledge/` + `<namespace>/<path>`
  (or `document/<uuid>`), root-relative or as absolute URLs on the KNOWLEDGE_PUBLIC_URL host;
- relative paths (`../guides/setup.md`, `setup`, percent-encoded) inside the source's namespace.
Path links match the exact path first, then the same path with/without `.md`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from config.exceptions import Invalid
from graph.extract import LinkRef
from knowledge.paths import normalise_path

SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")
SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
READER_PREFIXES = (("ui", "kb"), ("ui", "knowledge"), ("kb",), ("knowledge",))
MAX_HREF_CHARS = 2048
MAX_FRAGMENT_CHARS = 500
MAX_PATH_BYTES = 1024
MAX_DISTINCT_LINKS = 2000
MAX_FRAGMENTS_PER_EDGE = 20
LOOKUP_CHUNK = 500


@dataclass(frozen=True)
class DocumentTarget:
    document_id: uuid.UUID
    fragment: str = ""

    @property
    def key(self) -> tuple[str, ...]:
        return ("document", str(self.document_id))


@dataclass(frozen=True)
class PathTarget:
    namespace: str
    path: str
    alt_path: str = ""
    fragment: str = ""

    @property
    def key(self) -> tuple[str, ...]:
        return ("path", self.namespace, self.path)


@dataclass(frozen=True)
class InvalidTarget:
    problem: str
    href: str = ""

    @property
    def key(self) -> tuple[str, ...]:
        return ("invalid", self.href)


@dataclass(frozen=True)
class Ignored:
    """Not a document link at all: an external URL or an anchor in the same document."""

    reason: str  # external | anchor


Target = DocumentTarget | PathTarget | InvalidTarget


# --- pure parsing --------------------------------------------------------------------------


def _fragment(raw: str) -> str:
    return unquote(raw, errors="replace").strip()[:MAX_FRAGMENT_CHARS]


def _decode_segment(segment: str) -> str:
    try:
        decoded = unquote(segment, errors="strict")
    except UnicodeDecodeError as exc:
        raise ValueError("percent-encoding is not valid UTF-8") from exc
    if "/" in decoded or "\\" in decoded or "\x00" in decoded:
        raise ValueError("a path segment may not encode '/', '\\' or NUL")
    return decoded


def _document_uuid(raw: str) -> uuid.UUID | None:
    text = unquote(raw, errors="replace").strip().rstrip("/")
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def alternate_path(path: str) -> str:
    """The same path with `.md` removed or added: links may be written either way."""
    if path.lower().endswith(".md"):
        stem = path[:-3]
        return stem if stem and not stem.endswith("/") else ""
    alt = path + ".md"
    return alt if len(alt.encode("utf-8")) <= MAX_PATH_BYTES else ""


def _path_target(namespace: str, segments: list[str], fragment: str) -> PathTarget | InvalidTarget:
    try:
        decoded = [_decode_segment(segment) for segment in segments]
        path = normalise_path("/".join(decoded))
    except (ValueError, Invalid) as exc:
        return InvalidTarget(getattr(exc, "message", None) or str(exc))
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        return InvalidTarget(f"paths in links are limited to {MAX_PATH_BYTES} bytes")
    return PathTarget(namespace=namespace, path=path, alt_path=alternate_path(path), fragment=fragment)


def _namespace_target(segments: list[str], fragment: str) -> Target:
    """`<namespace>/<path...>` or `document/<uuid>` (the segment `document` is reserved)."""
    if not segments or not segments[0]:
        return InvalidTarget("no namespace")
    namespace = unquote(segments[0], errors="replace").lower()
    rest = segments[1:]
    if namespace == "document":
        document_id = _document_uuid("/".join(rest))
        if document_id is None:
            return InvalidTarget("agor://kb/document/ needs a document id")
        return DocumentTarget(document_id, fragment)
    if not SLUG.match(namespace) or len(namespace) > 100:
        return InvalidTarget("not a namespace slug")
    if not rest or not any(rest):
        return InvalidTarget("no document path")
    return _path_target(namespace, rest, fragment)


def _reader_target(path: str, fragment: str) -> Target | Ignored:
    """A root-relative site path: a reader/app route, or some other page of the site."""
    segments = path.lstrip("/").split("/")
    lowered = [segment.lower() for segment in segments]
    for prefix in READER_PREFIXES:
        if tuple(lowered[: len(prefix)]) == prefix and len(segments) > len(prefix) + 1:
            rest = segments[len(prefix) :]
            if prefix == ("kb",) and rest[0] == "documents" and len(rest) == 2 and _document_uuid(rest[1]):
                return DocumentTarget(_document_uuid(rest[1]), fragment)  # the API URL of a document
            return _namespace_target(rest, fragment)
    return Ignored("external")


def _relative_target(href: str, namespace: str, source_path: str, fragment: str) -> Target:
    if "\\" in href:
        return InvalidTarget("backslashes are not path separators")
    folder = source_path.rsplit("/", 1)[0].split("/") if "/" in source_path else []
    if href.endswith("/"):
        return InvalidTarget("the link points at a folder")
    segments: list[str] = list(folder)
    for segment in href.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not segments:
                return InvalidTarget("the link leaves the namespace")
            segments.pop()
            continue
        segments.append(segment)
    return _path_target(namespace, segments, fragment)


def _public_base(public_url: str) -> tuple[str, str] | None:
    if not public_url:
        return None
    parts = urlsplit(public_url.strip())
    if not parts.netloc:
        return None
    return parts.netloc.lower(), parts.path.rstrip("/")


def parse_destination(href: str, *, namespace: str, source_path: str, public_url: str = "") -> Target | Ignored:
    """Classify one destination relative to a source document at `namespace`/`source_path`."""
    href = (href or "").strip()[:MAX_HREF_CHARS]
    base, _, raw_fragment = href.partition("#")
    base = base.partition("?")[0]
    fragment = _fragment(raw_fragment)
    if not base:
        return Ignored("anchor")
    scheme_match = SCHEME.match(base)
    if scheme_match:
        scheme = scheme_match.group(1).lower()
        rest = base[scheme_match.end() :]
        if scheme == "agor":
            if not rest.lower().startswith("//kb/"):
                return InvalidTarget("only agor://kb/ URIs name documents")
            return _namespace_target(rest[len("//kb/") :].split("/"), fragment)
        if scheme in ("http", "https"):
            return _absolute_target(base, fragment, public_url)
        return Ignored("external")
    if base.startswith("//"):
        return _absolute_target("https:" + base, fragment, public_url)
    if base.startswith("/"):
        return _reader_target(base, fragment)
    return _relative_target(base, namespace, source_path, fragment)


def _absolute_target(url: str, fragment: str, public_url: str) -> Target | Ignored:
    public = _public_base(public_url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return Ignored("external")
    if public is None or parts.netloc.lower() != public[0]:
        return Ignored("external")
    path = parts.path
    prefix = public[1]
    if prefix:
        if not (path == prefix or path.startswith(prefix + "/")):
            return Ignored("external")
        path = path[len(prefix) :]
    return _reader_target(path, fragment)


# --- batched resolution ----------------------------------------------------------------------


@dataclass
class ResolvedLink:
    """A distinct link of the source: its first spelling, its parsed target and, if found, the document."""

    href: str
    kind: str
    target: Target
    document_id: uuid.UUID | None = None


@dataclass
class Resolution:
    links: list[ResolvedLink] = field(default_factory=list)
    # target document id -> fragments linked to, in order of first appearance (self-links excluded)
    targets: dict[uuid.UUID, list[str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)


def _chunks(values: list, size: int = LOOKUP_CHUNK) -> Iterable[list]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _lookup_ids(workspace_id: int, ids: set[uuid.UUID]) -> set[uuid.UUID]:
    from knowledge.models import Document

    found: set[uuid.UUID] = set()
    for chunk in _chunks(sorted(ids, key=str)):
        found.update(
            Document.objects.filter(namespace__workspace_id=workspace_id, pk__in=chunk).values_list("pk", flat=True)
        )
    return found


def lookup_paths(workspace_id: int, wanted: dict[str, set[str]]) -> dict[tuple[str, str], uuid.UUID]:
    """(namespace slug, path) -> id of the active document there."""
    from knowledge.models import Document
    from workspaces.models import Namespace

    namespaces = dict(
        Namespace.objects.filter(workspace_id=workspace_id, slug__in=list(wanted)).values_list("slug", "id")
    )
    found: dict[tuple[str, str], uuid.UUID] = {}
    for slug, namespace_id in namespaces.items():
        for chunk in _chunks(sorted(wanted[slug])):
            rows = Document.objects.filter(namespace_id=namespace_id, archived=False, path__in=chunk)
            for path, document_id in rows.values_list("path", "pk"):
                found[(slug, path)] = document_id
    return found


def resolve_links(
    refs: list[LinkRef],
    *,
    workspace_id: int,
    namespace: str,
    source_path: str,
    source_id: uuid.UUID,
    public_url: str = "",
) -> Resolution:
    """Dedup, parse and look up a document's links. Links to the document itself are dropped."""
    counts = dict.fromkeys(
        ("links", "distinct", "resolved", "pending", "missing", "invalid", "external", "anchors", "self", "skipped"), 0
    )
    distinct: dict[tuple[str, ...], ResolvedLink] = {}
    fragments: dict[tuple[str, ...], list[str]] = {}
    for ref in refs:
        counts["links"] += 1
        target = parse_destination(ref.href, namespace=namespace, source_path=source_path, public_url=public_url)
        if isinstance(target, Ignored):
            counts["anchors" if target.reason == "anchor" else "external"] += 1
            continue
        if isinstance(target, InvalidTarget):
            target = InvalidTarget(target.problem, ref.href[:MAX_HREF_CHARS])
        key = target.key
        if key not in distinct:
            if len(distinct) >= MAX_DISTINCT_LINKS:
                counts["skipped"] += 1
                continue
            distinct[key] = ResolvedLink(href=ref.href[:MAX_HREF_CHARS], kind=ref.kind, target=target)
            fragments[key] = []
        fragment = getattr(target, "fragment", "")
        if fragment and fragment not in fragments[key] and len(fragments[key]) < MAX_FRAGMENTS_PER_EDGE:
            fragments[key].append(fragment)

    ids = {link.target.document_id for link in distinct.values() if isinstance(link.target, DocumentTarget)}
    wanted: dict[str, set[str]] = {}
    for link in distinct.values():
        if isinstance(link.target, PathTarget):
            candidates = wanted.setdefault(link.target.namespace, set())
            candidates.add(link.target.path)
            if link.target.alt_path:
                candidates.add(link.target.alt_path)
    existing_ids = _lookup_ids(workspace_id, ids) if ids else set()
    by_path = lookup_paths(workspace_id, wanted) if wanted else {}

    resolution = Resolution(counts=counts)
    for key, link in distinct.items():
        target = link.target
        if isinstance(target, DocumentTarget):
            link.document_id = target.document_id if target.document_id in existing_ids else None
        elif isinstance(target, PathTarget):
            link.document_id = by_path.get((target.namespace, target.path)) or by_path.get(
                (target.namespace, target.alt_path)
            )
        if link.document_id == source_id:
            counts["self"] += 1
            continue
        counts["distinct"] += 1
        resolution.links.append(link)
        if isinstance(target, InvalidTarget):
            counts["invalid"] += 1
        elif link.document_id is None:
            counts["pending" if isinstance(target, PathTarget) else "missing"] += 1
        else:
            merged = resolution.targets.setdefault(link.document_id, [])
            for fragment in fragments[key]:
                if fragment not in merged and len(merged) < MAX_FRAGMENTS_PER_EDGE:
                    merged.append(fragment)
    counts["resolved"] = len(resolution.targets)
    counts["unresolved"] = counts["pending"] + counts["missing"] + counts["invalid"]
    return resolution
