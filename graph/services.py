"""Writes to the graph: reference sync after content saves, pending-link resolution, explicit links.

Reference sync is best-effort. It runs after the content write committed, in its own
transaction; if anything fails it rolls back, the previous graph stays as it was, the error is
logged, and the next save (or `kb_reconcile_links`) repairs it. The save itself never fails.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from config.exceptions import Invalid, NotFound
from graph import resolve
from graph.extract import extract_links
from graph.models import ContentLink, EdgeType, GraphEdge, GraphNode, LinkForm, NodeType, document_node_uri
from knowledge.exceptions import DocumentArchived
from knowledge.models import Document
from workspaces import access
from workspaces.access import Actor

logger = logging.getLogger(__name__)

# The one edge property reference sync manages; every other property is left as it was set.
FRAGMENTS = "fragments"


# --- nodes ---------------------------------------------------------------------------------


def _new_node(document: Document, workspace_id: int) -> GraphNode:
    return GraphNode(
        workspace_id=workspace_id,
        node_type=NodeType.DOCUMENT,
        uri=document_node_uri(document.pk),
        document_id=document.pk,
        label=(document.title or "")[:500],
    )


def document_nodes(document_ids: Iterable[uuid.UUID], *, workspace_id: int) -> dict[uuid.UUID, GraphNode]:
    """The nodes of these documents (same workspace), created where missing; tolerates races."""
    wanted = set(document_ids)
    if not wanted:
        return {}
    found = {node.document_id: node for node in GraphNode.objects.filter(document_id__in=wanted)}
    missing = wanted - found.keys()
    if missing:
        documents = Document.objects.filter(pk__in=missing, namespace__workspace_id=workspace_id).only("id", "title")
        GraphNode.objects.bulk_create([_new_node(doc, workspace_id) for doc in documents], ignore_conflicts=True)
        found.update({node.document_id: node for node in GraphNode.objects.filter(document_id__in=missing)})
    return found


def document_node(document: Document) -> GraphNode:
    workspace_id = document.namespace.workspace_id
    return document_nodes([document.pk], workspace_id=workspace_id)[document.pk]


def _lock_node(node: GraphNode) -> GraphNode:
    """Serialise graph writes per source node (SQLite serialises writers anyway).

    NO KEY UPDATE, not UPDATE: inserting an edge takes KEY SHARE on both of its nodes, and a
    full row lock here would make a sync and a pending-link resolver deadlock on each other.
    """
    return GraphNode.objects.select_for_update(no_key=True).get(pk=node.pk)


def _with_fragments(properties: dict[str, Any], fragments: list[str]) -> dict[str, Any]:
    merged = dict(properties or {})
    if fragments:
        merged[FRAGMENTS] = list(fragments)
    else:
        merged.pop(FRAGMENTS, None)
    return merged


# --- reference sync ------------------------------------------------------------------------


@dataclass
class SyncResult:
    document_id: str
    version_id: str | None
    status: str  # synced | stale | missing
    counts: dict[str, int] = field(default_factory=dict)
    created: int = 0
    restored: int = 0
    archived: int = 0
    updated: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _content_link_row(node: GraphNode, workspace_id: int, ordinal: int, link: resolve.ResolvedLink) -> ContentLink:
    target = link.target
    row = ContentLink(
        source=node,
        workspace_id=workspace_id,
        ordinal=ordinal,
        href=link.href,
        target_document_id=link.document_id,
    )
    if isinstance(target, resolve.DocumentTarget):
        row.form, row.document_ref, row.fragment = LinkForm.DOCUMENT, target.document_id, target.fragment
    elif isinstance(target, resolve.PathTarget):
        row.form, row.fragment = LinkForm.PATH, target.fragment
        row.namespace_slug, row.path, row.alt_path = target.namespace, target.path, target.alt_path
    else:
        row.form, row.problem = LinkForm.INVALID, target.problem[:200]
    return row


def _replace_references(
    node: GraphNode, targets: dict[uuid.UUID, GraphNode], fragments: dict[uuid.UUID, list[str]], author_id: Any
) -> SyncResult:
    """Make the active outgoing `references` edges exactly `targets`, reusing archived rows."""
    result = SyncResult(document_id="", version_id=None, status="synced")
    now = timezone.now()
    existing = {edge.target_id: edge for edge in GraphEdge.objects.filter(source=node, edge_type=EdgeType.REFERENCES)}
    wanted = {target.pk for target in targets.values()}
    to_create: list[GraphEdge] = []
    to_update: list[GraphEdge] = []
    for document_id, target in targets.items():
        edge = existing.get(target.pk)
        if edge is None:
            to_create.append(
                GraphEdge(
                    source=node,
                    target=target,
                    edge_type=EdgeType.REFERENCES,
                    confidence=1.0,
                    properties=_with_fragments({}, fragments.get(document_id, [])),
                    created_by_id=author_id,
                )
            )
            continue
        properties = _with_fragments(edge.properties, fragments.get(document_id, []))
        if edge.archived or properties != edge.properties:
            if edge.archived:
                result.restored += 1
            else:
                result.updated += 1
            edge.archived, edge.archived_at, edge.properties, edge.updated_at = False, None, properties, now
            to_update.append(edge)
    for edge in existing.values():
        if not edge.archived and edge.target_id not in wanted:
            edge.archived, edge.archived_at, edge.updated_at = True, now, now
            to_update.append(edge)
            result.archived += 1
    if to_create:
        GraphEdge.objects.bulk_create(to_create, batch_size=500)
    if to_update:
        GraphEdge.objects.bulk_update(
            to_update, ["archived", "archived_at", "properties", "updated_at"], batch_size=500
        )
    result.created = len(to_create)
    return result


def _resolution(document: Document) -> resolve.Resolution:
    return resolve.resolve_links(
        extract_links(document.current_version.content),
        workspace_id=document.namespace.workspace_id,
        namespace=document.namespace.slug,
        source_path=document.path,
        source_id=document.pk,
        public_url=settings.KNOWLEDGE_PUBLIC_URL,
    )


def _current(document_id: uuid.UUID) -> Document | None:
    return Document.objects.select_related("namespace", "current_version").filter(pk=document_id).first()


def _sync(document_id: uuid.UUID, version_id: str | None) -> SyncResult:
    """Parse and resolve outside any transaction, make every node row exist (committed), then
    lock the source node and write the edges.

    Node rows are committed before a node lock is taken: an uncommitted node insert blocks every
    other insert of that node until its transaction ends, so inserting one while holding a lock
    deadlocks against a resolver that inserted it and now waits for our lock. The parse also
    stays out of the transaction, so SQLite's write lock is not held through it.
    """
    missing = SyncResult(document_id=str(document_id), version_id=version_id, status="missing")
    stale = SyncResult(document_id=str(document_id), version_id=version_id, status="stale")
    parsed = _current(document_id)
    if parsed is None or parsed.current_version is None:
        return missing
    if version_id and str(parsed.current_version_id) != str(version_id):
        return stale
    workspace_id = parsed.namespace.workspace_id
    resolution = _resolution(parsed)
    document_nodes([parsed.pk, *resolution.targets], workspace_id=workspace_id)
    with transaction.atomic():
        node = _lock_node(document_node(parsed))
        # Read the document again under the node lock: a newer version committed meanwhile means a
        # newer sync is queued behind us, and this one must not overwrite it with older links.
        document = _current(document_id)
        if document is None or document.current_version is None:
            return missing
        if version_id and str(document.current_version_id) != str(version_id):
            return stale
        if document.current_version_id != parsed.current_version_id or document.path != parsed.path:
            resolution = _resolution(document)  # rare: the document changed between parse and lock
        targets = document_nodes(resolution.targets, workspace_id=workspace_id)
        result = _replace_references(node, targets, resolution.targets, document.current_version.author_id)
        ContentLink.objects.filter(source=node).delete()
        ContentLink.objects.bulk_create(
            [_content_link_row(node, workspace_id, ordinal, link) for ordinal, link in enumerate(resolution.links)],
            batch_size=500,
        )
        metadata = {key: value for key, value in node.metadata.items() if key != "sync_error"}
        metadata["sync"] = {
            "version_id": str(document.current_version_id),
            "version": document.current_version.number,
            "synced_at": timezone.now().isoformat(),
            "counts": resolution.counts,
        }
        node.metadata, node.label = metadata, (document.title or "")[:500]
        node.save(update_fields=["metadata", "label", "updated_at"])
    result.document_id, result.version_id = str(document.pk), str(document.current_version_id)
    result.counts = resolution.counts
    return result


def _record_failure(document_id: uuid.UUID, version_id: str | None, exc: BaseException) -> None:
    """Leave a trace on the node for operators; best-effort, never raises."""
    try:
        with transaction.atomic():
            node = GraphNode.objects.filter(document_id=document_id).first()
            if node is not None:
                node.metadata = {
                    **node.metadata,
                    "sync_error": {
                        "version_id": version_id,
                        "at": timezone.now().isoformat(),
                        "error": type(exc).__name__,
                    },
                }
                node.save(update_fields=["metadata", "updated_at"])
    except Exception:  # the failure itself is already logged
        logger.debug("graph: could not record the sync failure of %s", document_id, exc_info=True)


def _as_uuid(value: uuid.UUID | str) -> uuid.UUID | None:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError:
        return None


def references_sync(
    *, document_id: uuid.UUID | str, version_id: uuid.UUID | str | None = None, strict: bool = False
) -> SyncResult | None:
    """Replace a document's outgoing `references` edges by what its current version links to.

    With `version_id`, a document that has moved on to a newer version is skipped (that
    version's own sync follows). Returns None when the sync failed (logged; strict re-raises).
    """
    doc_id = _as_uuid(document_id)
    if doc_id is None:
        return None
    version = str(version_id) if version_id else None
    try:
        result = _sync(doc_id, version)
    except Exception as exc:
        if strict:
            raise
        logger.error(
            "graph: reference sync failed for document %s (version %s): %s; the previous graph is kept",
            doc_id,
            version,
            type(exc).__name__,
            exc_info=True,
        )
        _record_failure(doc_id, version, exc)
        return None
    if result.status == "synced":
        pending_links_resolve(document_id=doc_id, strict=strict)
        try:
            _recheck_own_pending(doc_id, strict=strict)
        except Exception:
            if strict:
                raise
            logger.error("graph: pending-link recheck failed for document %s", doc_id, exc_info=True)
    return result


def _recheck_own_pending(document_id: uuid.UUID, *, strict: bool) -> None:
    """Close a race: a target created while this sync ran may have looked for pending links
    before ours were committed. Looking again after our commit means one of us sees the other."""
    rows = ContentLink.objects.filter(
        source__document_id=document_id, form=LinkForm.PATH, target_document__isnull=True
    ).values_list("workspace_id", "namespace_slug", "path", "alt_path")
    wanted: dict[str, set[str]] = {}
    workspaces: set[int] = set()
    for workspace_id, slug, path, alt_path in rows:
        workspaces.add(workspace_id)
        wanted.setdefault(slug, set()).update(p for p in (path, alt_path) if p)
    if len(workspaces) != 1:
        return
    for target_id in set(resolve.lookup_paths(workspaces.pop(), wanted).values()):
        pending_links_resolve(document_id=target_id, strict=strict)


# --- pending links -------------------------------------------------------------------------


def _upsert_reference(source: GraphNode, target: GraphNode, fragments: list[str], author_id: Any) -> None:
    edge = GraphEdge.objects.filter(source=source, target=target, edge_type=EdgeType.REFERENCES).first()
    if edge is None:
        GraphEdge.objects.create(
            source=source,
            target=target,
            edge_type=EdgeType.REFERENCES,
            properties=_with_fragments({}, fragments),
            created_by_id=author_id,
        )
        return
    merged = list(edge.properties.get(FRAGMENTS) or []) if not edge.archived else []
    merged += [fragment for fragment in fragments if fragment not in merged]
    edge.properties = _with_fragments(edge.properties, merged[: resolve.MAX_FRAGMENTS_PER_EDGE])
    edge.archived, edge.archived_at = False, None
    edge.save(update_fields=["properties", "archived", "archived_at", "updated_at"])


def _resolve_pending(document_id: uuid.UUID) -> int:
    document = Document.objects.select_related("namespace").filter(pk=document_id, archived=False).first()
    if document is None:
        return 0
    workspace_id = document.namespace.workspace_id
    matching = Q(path=document.path) | Q(alt_path=document.path)
    pending = ContentLink.objects.filter(
        workspace_id=workspace_id,
        namespace_slug=document.namespace.slug,
        form=LinkForm.PATH,
        target_document__isnull=True,
    ).filter(matching)
    source_ids = sorted(set(pending.exclude(source__document_id=document.pk).values_list("source_id", flat=True)))
    if not source_ids:
        return 0
    target = document_node(document)  # committed before any source lock, as in _sync
    resolved = 0
    with transaction.atomic():
        for source_id in source_ids:  # in id order, so concurrent resolvers lock in the same order
            source = GraphNode.objects.select_for_update(no_key=True).filter(pk=source_id).first()
            if source is None:
                continue
            rows = list(pending.filter(source=source))  # re-read under the lock: a sync may have replaced them
            if not rows:
                continue
            fragments = [row.fragment for row in rows if row.fragment]
            source_doc = Document.objects.filter(pk=source.document_id)
            author_id = source_doc.values_list("current_version__author_id", flat=True).first()
            _upsert_reference(source, target, fragments, author_id)
            ContentLink.objects.filter(pk__in=[row.pk for row in rows]).update(target_document=document)
            resolved += 1
    return resolved


def pending_links_resolve(*, document_id: uuid.UUID | str, strict: bool = False) -> int:
    """Turn links to this document's path, written before it existed there, into edges.

    Runs after a create (from the reference sync), and after a move or restore. Returns how
    many source documents gained an edge; best-effort like the sync itself.
    """
    doc_id = _as_uuid(document_id)
    if doc_id is None:
        return 0
    try:
        return _resolve_pending(doc_id)
    except Exception as exc:
        if strict:
            raise
        logger.error(
            "graph: pending-link resolution failed for document %s: %s", doc_id, type(exc).__name__, exc_info=True
        )
        return 0


def pending_links_resolve_namespace(*, namespace_id: int) -> int:
    """After a namespace restore: pending links to any of its (now active) documents become edges."""
    from workspaces.models import Namespace

    namespace = Namespace.objects.filter(pk=namespace_id, archived=False).first()
    if namespace is None:
        return 0
    pending = ContentLink.objects.filter(
        workspace_id=namespace.workspace_id,
        namespace_slug=namespace.slug,
        form=LinkForm.PATH,
        target_document__isnull=True,
    )
    paths = set(pending.values_list("path", flat=True)) | set(pending.values_list("alt_path", flat=True))
    paths.discard("")
    resolved = 0
    candidates = sorted(paths)
    for start in range(0, len(candidates), resolve.LOOKUP_CHUNK):
        chunk = candidates[start : start + resolve.LOOKUP_CHUNK]
        documents = Document.objects.filter(namespace=namespace, archived=False, path__in=chunk)
        for document_id in documents.values_list("pk", flat=True):
            resolved += pending_links_resolve(document_id=document_id)
    return resolved


# --- rebuild -------------------------------------------------------------------------------


def links_reconcile(
    *,
    namespace: str | None = None,
    workspace: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Re-sync every document (archived ones too, so a restore brings their links back)."""
    documents = Document.objects.order_by("namespace_id", "path", "id")
    if workspace:
        documents = documents.filter(namespace__workspace__slug=workspace)
    if namespace:
        documents = documents.filter(namespace__slug=namespace)
    summary = {"documents": 0, "synced": 0, "failed": 0, "skipped": 0, "edges": 0, "unresolved": 0}
    for document_id in documents.values_list("pk", flat=True).iterator(chunk_size=500):
        summary["documents"] += 1
        result = references_sync(document_id=document_id)
        if result is None:
            summary["failed"] += 1
        elif result.status != "synced":
            summary["skipped"] += 1
        else:
            summary["synced"] += 1
            summary["edges"] += result.counts.get("resolved", 0)
            summary["unresolved"] += result.counts.get("unresolved", 0)
        if progress is not None:
            progress(summary["documents"])
    return summary


# --- explicit links ------------------------------------------------------------------------


@dataclass
class LinkResult:
    edge: GraphEdge
    created: bool = False
    changed: bool = False


def link_upsert(
    *,
    actor: Actor,
    source: Document,
    target: Document,
    edge_type: str,
    confidence: float | None = None,
    properties: dict[str, Any] | None = None,
) -> LinkResult:
    """Create, update or restore the edge (source, target, type). Needs write on the source
    and read on the target; an archived edge comes back in place with its id.

    `references` edges made here are replaced by the source's content on its next save.
    """
    access.require_document_write(actor, source)
    access.require_document_read(actor, target)
    if source.pk == target.pk:
        raise Invalid("A document cannot link to itself.", field="target")
    for role, document in (("source", source), ("target", target)):
        if document.archived:
            raise DocumentArchived(f"The {role} document is archived. Restore it before linking it.", field=role)
    nodes = document_nodes([source.pk, target.pk], workspace_id=actor.workspace.pk)  # committed first, as in _sync
    with transaction.atomic():
        source_node = _lock_node(nodes[source.pk])
        edge = GraphEdge.objects.filter(source=source_node, target=nodes[target.pk], edge_type=edge_type).first()
        if edge is None:
            try:
                with transaction.atomic():
                    edge = GraphEdge.objects.create(
                        source=source_node,
                        target=nodes[target.pk],
                        edge_type=edge_type,
                        confidence=1.0 if confidence is None else confidence,
                        properties=properties or {},
                        created_by=actor.user,
                    )
                return LinkResult(edge=edge, created=True, changed=True)
            except IntegrityError:  # a concurrent writer created it first; update that one
                edge = GraphEdge.objects.get(source=source_node, target=nodes[target.pk], edge_type=edge_type)
        updates: dict[str, Any] = {}
        if edge.archived:
            updates.update(archived=False, archived_at=None)
        if confidence is not None and confidence != edge.confidence:
            updates["confidence"] = confidence
        if properties is not None and properties != edge.properties:
            updates["properties"] = properties
        for name, value in updates.items():
            setattr(edge, name, value)
        if updates:
            edge.save(update_fields=[*updates, "updated_at"])
        return LinkResult(edge=edge, changed=bool(updates))


def _visible_edge(actor: Actor, edge_id: uuid.UUID | str) -> GraphEdge:
    """An edge both of whose documents the actor can read, in the actor's workspace; else NotFound."""
    parsed = _as_uuid(edge_id)
    edge = (
        GraphEdge.objects.select_related("source__document", "target__document")
        .filter(pk=parsed, source__workspace=actor.workspace)
        .first()
        if parsed
        else None
    )
    if edge is None or edge.source.document is None or edge.target.document is None:
        raise NotFound("Link not found.")
    if not (
        access.can_read_document(actor, edge.source.document) and access.can_read_document(actor, edge.target.document)
    ):
        raise NotFound("Link not found.")
    return edge


def link_archive(*, actor: Actor, edge_id: uuid.UUID | str) -> LinkResult:
    """Archive (unlink) an edge; needs write on its source. Re-linking restores the same edge."""
    edge = _visible_edge(actor, edge_id)
    access.require_document_write(actor, edge.source.document)
    with transaction.atomic():
        _lock_node(edge.source)
        edge.refresh_from_db()
        if edge.archived:
            return LinkResult(edge=edge, changed=False)
        edge.archived, edge.archived_at = True, timezone.now()
        edge.save(update_fields=["archived", "archived_at", "updated_at"])
    return LinkResult(edge=edge, changed=True)


def link_archive_by_triple(*, actor: Actor, source: Document, target: Document, edge_type: str) -> LinkResult:
    """The POST form of unlinking: archive (source, target, type) if it exists."""
    access.require_document_write(actor, source)
    access.require_document_read(actor, target)
    edge = (
        GraphEdge.objects.filter(source__document=source, target__document=target, edge_type=edge_type)
        .only("id")
        .first()
    )
    if edge is None:
        raise NotFound("Link not found.")
    return link_archive(actor=actor, edge_id=edge.pk)
