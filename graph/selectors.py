"""Graph reads. Visibility is decided inside the SQL with `workspaces.access.document_read_filter`:
an edge is shown only when both its documents are readable (and active), so an unreadable
document never appears, not even as an edge endpoint.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q, QuerySet

from config.exceptions import Invalid
from graph import resolve
from graph.models import ContentLink, GraphEdge, GraphNode, LinkForm
from knowledge import selectors as knowledge_selectors
from knowledge.models import Document
from workspaces import access
from workspaces.access import Actor
from workspaces.models import Namespace

DIRECTIONS = ("out", "in", "both")
MAX_NEIGHBOR_EDGES = 1000
MAX_NAMESPACE_EDGES = 5000
EDGE_FIELDS = ("id", "source__document_id", "target__document_id", "edge_type", "confidence", "properties")


# --- node references -----------------------------------------------------------------------


def document_from_ref(
    *,
    actor: Actor,
    document_id: uuid.UUID | str | None = None,
    uri: str | None = None,
    namespace: str | None = None,
    path: str | None = None,
) -> Document:
    """The readable document a node reference names: an id, an agor:// URI, or namespace + path."""
    if document_id:
        return knowledge_selectors.document_get(actor=actor, document_id=document_id)
    if uri:
        if not uri.strip().lower().startswith("agor://kb/"):
            raise Invalid("uri must be agor://kb/document/<id> or agor://kb/<namespace>/<path>.", field="uri")
        target = resolve.parse_destination(uri, namespace="", source_path="")
        if isinstance(target, resolve.DocumentTarget):
            return knowledge_selectors.document_get(actor=actor, document_id=target.document_id)
        if isinstance(target, resolve.PathTarget):
            return knowledge_selectors.document_get_by_path(actor=actor, namespace=target.namespace, path=target.path)
        raise Invalid(f"uri is not a document address: {getattr(target, 'problem', 'unsupported form')}.", field="uri")
    if namespace and path:
        return knowledge_selectors.document_get_by_path(actor=actor, namespace=namespace, path=path)
    raise Invalid("Name a document: document_id, uri, or namespace + path.", field="document_id")


# --- shared filters ------------------------------------------------------------------------


def _visible_end(actor: Actor, side: str, *, except_node: int | None = None) -> Q:
    """The `side` ("source"/"target") of an edge is an active document the actor may read."""
    q = Q(**{f"{side}__document__archived": False}) & access.document_read_filter(actor, f"{side}__document__")
    if except_node is not None:
        q |= Q(**{f"{side}_id": except_node})  # the document asked about: already authorized
    return q


def visible_edges(
    actor: Actor, *, edge_types: list[str] | None = None, except_node: int | None = None
) -> QuerySet[GraphEdge]:
    """Active edges between documents the actor can read (plus, optionally, one authorized node)."""
    queryset = GraphEdge.objects.filter(archived=False, source__workspace=actor.workspace).filter(
        _visible_end(actor, "source", except_node=except_node), _visible_end(actor, "target", except_node=except_node)
    )
    if edge_types:
        queryset = queryset.filter(edge_type__in=edge_types)
    return queryset


def _edge_rows(queryset: QuerySet[GraphEdge], cap: int) -> tuple[list[dict[str, Any]], bool]:
    rows = list(queryset.order_by("created_at", "id").values(*EDGE_FIELDS)[: cap + 1])
    edges = [
        {
            "id": row["id"],
            "source": row["source__document_id"],
            "target": row["target__document_id"],
            "edge_type": row["edge_type"],
            "confidence": row["confidence"],
            "properties": row["properties"],
        }
        for row in rows[:cap]
    ]
    return edges, len(rows) > cap


# --- neighbours ----------------------------------------------------------------------------


@dataclass
class Neighborhood:
    center: Document
    nodes: list[tuple[Document, int]] = field(default_factory=list)  # (document, depth), without the center
    edges: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False


def _step(base: QuerySet[GraphEdge], frontier: list[int], visited: set[int], direction: str, room: int) -> list[int]:
    """Node ids one hop from the frontier, not yet visited, in a stable order (at most room + 1)."""
    found: list[int] = []
    if direction in ("out", "both"):
        found += (
            base.filter(source_id__in=frontier)
            .exclude(target_id__in=visited)
            .order_by("target_id")
            .values_list("target_id", flat=True)
            .distinct()[: room + 1]
        )
    if direction in ("in", "both"):
        found += (
            base.filter(target_id__in=frontier)
            .exclude(source_id__in=visited)
            .order_by("source_id")
            .values_list("source_id", flat=True)
            .distinct()[: room + 1]
        )
    return sorted(set(found))


def neighbors(
    *,
    actor: Actor,
    document: Document,
    direction: str = "both",
    edge_types: list[str] | None = None,
    depth: int = 1,
    limit: int = 50,
) -> Neighborhood:
    """Breadth-first walk up to `depth` hops (one query per hop and direction), at most `limit` nodes."""
    result = Neighborhood(center=document)
    center = GraphNode.objects.filter(document=document).only("id").first()
    if center is None:
        return result
    base = visible_edges(actor, edge_types=edge_types, except_node=center.pk)
    depths: dict[int, int] = {center.pk: 0}
    frontier = [center.pk]
    for level in range(1, depth + 1):
        room = limit - (len(depths) - 1)
        if not frontier or room <= 0:
            break
        found = _step(base, frontier, set(depths), direction, room)
        if len(found) > room:
            found, result.truncated = found[:room], True
        for node_id in found:
            depths[node_id] = level
        frontier = found
        if result.truncated:
            break
    if len(depths) == 1:
        return result
    nodes = GraphNode.objects.filter(pk__in=[pk for pk in depths if pk != center.pk]).select_related(
        "document__namespace"
    )
    result.nodes = sorted(
        ((node.document, depths[node.pk]) for node in nodes if node.document is not None),
        key=lambda item: (item[1], item[0].namespace.slug, item[0].path),
    )
    ids = list(depths)
    result.edges, edges_truncated = _edge_rows(base.filter(source_id__in=ids, target_id__in=ids), MAX_NEIGHBOR_EDGES)
    result.truncated = result.truncated or edges_truncated
    return result


# --- namespace graph -----------------------------------------------------------------------


@dataclass
class NamespaceGraph:
    namespace: Namespace
    nodes: list[Document] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False
    total: int = 0


def namespace_graph(
    *, actor: Actor, namespace: Namespace, edge_types: list[str] | None = None, limit: int = 500
) -> NamespaceGraph:
    """Readable active documents of one namespace (by path) and the edges among them.

    Cross-namespace edges and edges to unreadable documents are left out; `truncated` says
    that the node or edge cap cut the picture.
    """
    documents = (
        Document.objects.filter(namespace=namespace, archived=False)
        .filter(access.document_read_filter(actor))
        .select_related("namespace")
        .order_by("path", "id")
    )
    rows = list(documents[: limit + 1])
    result = NamespaceGraph(namespace=namespace, nodes=rows[:limit], truncated=len(rows) > limit)
    if not result.nodes:
        return result
    edges = visible_edges(actor, edge_types=edge_types)
    if result.truncated:
        ids = [document.pk for document in result.nodes]
        edges = edges.filter(source__document_id__in=ids, target__document_id__in=ids)
    else:
        edges = edges.filter(source__document__namespace=namespace, target__document__namespace=namespace)
    result.edges, edges_truncated = _edge_rows(edges, MAX_NAMESPACE_EDGES)
    result.truncated = result.truncated or edges_truncated
    return result


# --- one document's links ------------------------------------------------------------------


@dataclass
class DocumentLinks:
    outgoing: list[tuple[dict[str, Any], Document]] = field(default_factory=list)
    backlinks: list[tuple[dict[str, Any], Document]] = field(default_factory=list)
    unresolved: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False


def _linked(queryset: QuerySet[GraphEdge], side: str, limit: int) -> tuple[list[tuple[dict[str, Any], Document]], bool]:
    edges = list(
        queryset.select_related(f"{side}__document__namespace").order_by(
            f"{side}__document__namespace__slug", f"{side}__document__path", "edge_type", "id"
        )[: limit + 1]
    )
    items = [
        (
            {
                "id": edge.pk,
                "edge_type": edge.edge_type,
                "confidence": edge.confidence,
                "properties": edge.properties,
            },
            getattr(edge, side).document,
        )
        for edge in edges[:limit]
    ]
    return items, len(edges) > limit


def _unresolved(actor: Actor, node: GraphNode, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """Links of the content that lead to no visible document. Unreadable and missing targets
    look the same (`not_found`), so nothing about other people's documents leaks."""
    rows = list(ContentLink.objects.filter(source=node).order_by("ordinal"))
    target_ids = [row.target_document_id for row in rows if row.target_document_id]
    readable = dict(
        Document.objects.filter(pk__in=target_ids)
        .filter(access.document_read_filter(actor))
        .values_list("pk", "archived")
    )
    items: list[dict[str, Any]] = []
    for row in rows:
        if row.form == LinkForm.INVALID:
            reason, detail = "invalid", row.problem
        elif row.target_document_id is None or row.target_document_id not in readable:
            reason, detail = "not_found", ""
        elif readable[row.target_document_id]:
            reason, detail = "archived", ""
        else:
            continue
        items.append({"href": row.href, "reason": reason, "detail": detail, "fragment": row.fragment})
    return items[:limit], len(items) > limit


def document_links(*, actor: Actor, document: Document, limit: int = 100) -> DocumentLinks:
    """Outgoing edges (any type), backlinks (readable documents linking here) and unresolved links."""
    result = DocumentLinks()
    node = GraphNode.objects.filter(document=document).first()
    if node is None:
        return result
    outgoing = GraphEdge.objects.filter(archived=False, source=node).filter(_visible_end(actor, "target"))
    incoming = GraphEdge.objects.filter(archived=False, target=node).filter(_visible_end(actor, "source"))
    result.outgoing, more_out = _linked(outgoing, "target", limit)
    result.backlinks, more_in = _linked(incoming, "source", limit)
    result.unresolved, more_unresolved = _unresolved(actor, node, limit)
    result.truncated = more_out or more_in or more_unresolved
    return result


def backlink_documents(*, actor: Actor, document: Document, limit: int = 50) -> list[Document]:
    """Readable active documents whose content references this one (for a `backlinks` field)."""
    return [
        doc
        for _, doc in _linked(
            GraphEdge.objects.filter(archived=False, target__document=document, edge_type="references").filter(
                _visible_end(actor, "source")
            ),
            "source",
            limit,
        )[0]
    ]
