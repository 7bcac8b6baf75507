"""Navigation reads: the folder tree of a namespace and `@` mention lookup.

Both are shaped from document rows only (never version content or metadata) and run a fixed
number of queries however many documents a namespace holds. Access rules stay in
`workspaces.access`; the querysets come from `knowledge.selectors.document_list`, so the read
filter is part of the SQL and a page is never short because of rows filtered afterwards.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.db.models import Case, IntegerField, Q, Value, When
from django.db.models.functions import Lower

from config.exceptions import Invalid
from knowledge import selectors
from knowledge.models import Document
from knowledge.paths import normalise_folder
from workspaces.access import Actor

ELLIPSIS = "…"  # the pseudo-folder that holds documents deeper than the requested depth
MIN_DEPTH, MAX_DEPTH, DEFAULT_DEPTH = 1, 10, 3
MAX_TREE_LIMIT = 100
MAX_MENTION_LIMIT = 50
TREE_FIELDS = ("id", "path", "title", "icon", "kind", "status")
MENTION_FIELDS = ("id", "path", "title", "icon", "updated_at", "namespace__slug")


class TreeDocument(Protocol):
    id: Any
    path: str
    title: str
    icon: str
    kind: str
    status: str


# --- tree shaping (pure) -------------------------------------------------------------------


def relative_path(path: str, prefix: str) -> str | None:
    """The part of `path` below the folder `prefix`: "" when they are equal, None when outside.

    Case-sensitive on purpose: paths are case-sensitive, `Guides/x` is not under `guides`.
    """
    if not prefix:
        return path
    if path == prefix:
        return ""
    if path.startswith(prefix + "/"):
        return path[len(prefix) + 1 :]
    return None


@dataclass
class _Folder:
    name: str
    path: str
    folders: dict[str, _Folder] = field(default_factory=dict)
    documents: list[TreeDocument] = field(default_factory=list)
    document_count: int = 0

    def child(self, name: str) -> _Folder:
        folder = self.folders.get(name)
        if folder is None:
            folder = _Folder(name=name, path=f"{self.path}/{name}" if self.path else name)
            self.folders[name] = folder
        return folder

    def render_children(self, namespace: str) -> list[dict[str, Any]]:
        folders = [
            {
                "type": "folder",
                "name": folder.name,
                "path": folder.path,
                "document_count": folder.document_count,
                "children": folder.render_children(namespace),
            }
            for folder in sorted(self.folders.values(), key=lambda f: f.name)
        ]
        documents = sorted(self.documents, key=lambda d: (d.path, str(d.id)))
        return folders + [document_node(d, namespace) for d in documents]


def document_node(document: TreeDocument, namespace: str) -> dict[str, Any]:
    return {
        "type": "doc",
        "icon": document.icon or None,
        "title": document.title,
        "kind": document.kind,
        "path": document.path,
        "uri": f"agor://kb/{namespace}/{document.path}",
        "reference_uri": f"agor://kb/document/{document.id}",
        "status": document.status,
    }


def build_tree(
    documents: Iterable[TreeDocument], *, namespace: str, prefix: str = "", depth: int = DEFAULT_DEPTH
) -> list[dict[str, Any]]:
    """Folder/document nodes for documents under `prefix` (a normalised folder, "" for the root).

    `depth` counts folder levels below the prefix. A document needing more folders than that
    goes into a `…` pseudo-folder inside its deepest shown folder, so every document of the
    page stays visible. A document whose path equals the prefix sits at the root. Folders come
    first (by name), then documents (by path); `document_count` includes all descendants.
    Documents outside the prefix are ignored.
    """
    if depth < MIN_DEPTH:
        raise ValueError("depth must be at least 1")
    root = _Folder(name="", path=prefix)
    for document in documents:
        relative = relative_path(document.path, prefix)
        if relative is None:
            continue
        folder_names = relative.split("/")[:-1] if relative else []
        node = root
        for name in folder_names[:depth]:
            node = node.child(name)
            node.document_count += 1
        if len(folder_names) > depth:
            node = node.child(ELLIPSIS)
            node.document_count += 1
        node.documents.append(document)
    return root.render_children(namespace)


# --- tree selector -------------------------------------------------------------------------


def namespace_tree(
    *,
    actor: Actor,
    namespace: str,
    path_prefix: str | None = None,
    depth: int = DEFAULT_DEPTH,
    kind: str | None = None,
    status: str | None = None,
    include_my_drafts: bool = True,
    include_other_user_drafts: bool = False,
    archive_filter: str = "active",
    limit: int = 25,
    offset: int = 0,
) -> dict[str, Any]:
    """One page of a namespace's documents (by path) shaped as a tree. Three queries plus access.

    Pagination is over documents, not nodes, so a folder may continue on the next page.
    """
    if not MIN_DEPTH <= depth <= MAX_DEPTH:
        raise Invalid(f"depth must be between {MIN_DEPTH} and {MAX_DEPTH}.", code="invalid", field="depth")
    if not 1 <= limit <= MAX_TREE_LIMIT:
        raise Invalid(f"limit must be between 1 and {MAX_TREE_LIMIT}.", code="invalid", field="limit")
    if offset < 0:
        raise Invalid("offset cannot be negative.", code="invalid", field="offset")
    ns, _ = selectors.namespace_get(actor=actor, slug=namespace)
    prefix = normalise_folder(path_prefix)
    filters = selectors.DocumentFilters(
        kind=kind,
        status=status,
        include_my_drafts=include_my_drafts,
        include_other_user_drafts=include_other_user_drafts,
        archive_filter=archive_filter,
        order="path",
    )
    queryset = (
        selectors.document_list(actor=actor, filters=filters)
        .filter(namespace=ns)
        .select_related(None)
        .only(*TREE_FIELDS)
    )
    queryset = selectors.under_folder(queryset, prefix, include_self=True)
    total = queryset.count()
    rows = list(queryset[offset : offset + limit + 1]) if offset < total else []
    has_more = len(rows) > limit
    rows = rows[:limit]
    return {
        "namespace": ns.slug,
        "path_prefix": prefix or None,
        "depth": depth,
        "count": len(rows),
        "truncated": has_more,
        "total": total,
        "tree": build_tree(rows, namespace=ns.slug, prefix=prefix, depth=depth),
        "pagination": {
            "limit": limit,
            "offset": offset,
            "has_more": has_more,
            "next_offset": offset + limit if has_more else None,
        },
    }


# --- mentions ------------------------------------------------------------------------------


def mention_rank(text: str) -> Case:
    """0-5: exact title, exact path, title prefix, path prefix, title contains, path contains.

    Django's iexact/istartswith/icontains escape `%`, `_` and `\\` in `text`, so user input is
    matched literally on SQLite and PostgreSQL alike.
    """
    return Case(
        When(title__iexact=text, then=Value(0)),
        When(path__iexact=text, then=Value(1)),
        When(title__istartswith=text, then=Value(2)),
        When(path__istartswith=text, then=Value(3)),
        When(title__icontains=text, then=Value(4)),
        default=Value(5),
        output_field=IntegerField(),
    )


def document_mentions(*, actor: Actor, q: str = "", namespace: str | None = None, limit: int = 8) -> list[Document]:
    """Readable, active documents whose title or path contains `q`, best matches first.

    An empty `q` lists the most recently updated readable documents. Filtering, ranking and
    the limit all happen in one SQL query, after the access filter.
    """
    if not 1 <= limit <= MAX_MENTION_LIMIT:
        raise Invalid(f"limit must be between 1 and {MAX_MENTION_LIMIT}.", code="invalid", field="limit")
    text = (q or "").strip()
    filters = selectors.DocumentFilters(namespace=namespace or None, archive_filter="active", order="-updated_at")
    queryset = (
        selectors.document_list(actor=actor, filters=filters)
        .select_related(None)
        .select_related("namespace")
        .only(*MENTION_FIELDS)
    )
    if text:
        queryset = (
            queryset.filter(Q(title__icontains=text) | Q(path__icontains=text))
            .annotate(mention_rank=mention_rank(text))
            .order_by("mention_rank", Lower("title"), "path", "id")
        )
    return list(queryset[:limit])


def markdown_link(title: str | None, document_id: Any) -> str:
    """`[title](agor://kb/document/<id>)`, safe to paste into markdown.

    Backslashes and brackets in the title are escaped and whitespace runs (newlines included)
    collapse to one space, so no title can end the link label early.
    """
    label = " ".join((title or "").split()) or "Untitled"
    label = label.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
    return f"[{label}](agor://kb/document/{document_id})"
