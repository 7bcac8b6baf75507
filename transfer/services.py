"""The server side of the transfer protocol: bounded reads for export, receipted writes for import.

Every action is a short transaction: a namespace create, one document with its receipt, the
reference reconciliation of one bounded request. A failed document never rolls back earlier ones,
and a retried request finds the receipt instead of creating a second document.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from config.exceptions import DomainError, Invalid, NotFound, PermissionDenied
from graph import hooks as graph_hooks
from knowledge import selectors
from knowledge import services as knowledge_services
from knowledge.models import Document, DocumentVersion
from transfer import format as fmt
from transfer.exceptions import (
    DestinationChanged,
    ImportedDocumentChanged,
    ImportExists,
    ImportPlanChanged,
    NamespaceExists,
    TransferLimit,
)
from transfer.models import ImportReceipt, NamespaceImport
from workspaces import services as workspace_services
from workspaces.access import Actor
from workspaces.models import Namespace, NamespaceACL, NamespaceKind, OthersCan, Permission, Visibility

logger = logging.getLogger(__name__)

INVENTORY_PAGE = 500
MAX_INVENTORY_PAGE = 1000
MAX_BATCH = 100
RESPONSE_BUDGET_BYTES = fmt.MAX_REQUEST_BYTES
IMPORT_CHANGE_SUMMARY = "Imported current Knowledge document"


def _digest(value: Any) -> str:
    return hashlib.sha256(fmt.canonical_json(value)).hexdigest()


def _iso(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


# --- export: inventory and bodies ----------------------------------------------------------


def _export_namespace(actor: Actor, slug: str) -> Namespace:
    """Export needs a workspace admin; a namespace the caller cannot see answers 404 like a missing one."""
    namespace, _ = selectors.namespace_get(actor=actor, slug=slug)
    if not actor.is_admin:
        raise PermissionDenied("Export needs a workspace admin (it includes private documents and drafts).")
    return namespace


def _namespace_provenance(namespace: Namespace) -> dict[str, Any]:
    imported = (namespace.metadata or {}).get("knowledge_import")
    if isinstance(imported, dict) and isinstance(imported.get("provenance"), dict):
        return imported["provenance"]
    return {
        "source_id": namespace.pk,
        "kind": namespace.kind,
        "owner": namespace.owner.username if namespace.owner_id else None,
        "created_by": namespace.created_by.username if namespace.created_by_id else None,
        "visibility_default": namespace.visibility_default,
        "others_can": namespace.others_can,
        "metadata": {k: v for k, v in (namespace.metadata or {}).items() if k != "knowledge_import"},
        "created_at": _iso(namespace.created_at),
        "updated_at": _iso(namespace.updated_at),
    }


# What an inventory entry reads: plain columns (model instances for 1,000 documents and their
# authors cost most of a page's time).
_ENTRY_FIELDS = {
    "id": "id",
    "path": "path",
    "title": "title",
    "icon": "icon",
    "kind": "kind",
    "status": "status",
    "visibility": "visibility",
    "edit_policy": "edit_policy",
    "metadata": "metadata",
    "created_at": "created_at",
    "updated_at": "updated_at",
    "created_by": "created_by__username",
    "updated_by": "updated_by__username",
    "version_id": "current_version_id",
    "number": "current_version__number",
    "sha256": "current_version__sha256",
    "bytes": "current_version__byte_length",
    "frontmatter": "current_version__frontmatter",
    "version_metadata": "current_version__metadata",
    "change_summary": "current_version__change_summary",
}


def _entry(row: dict[str, Any]) -> dict[str, Any]:
    metadata = {k: v for k, v in (row["metadata"] or {}).items() if k != "knowledge_import"}
    imported = (row["metadata"] or {}).get("knowledge_import")
    return {
        "document_id": str(row["id"]),
        "version_id": str(row["version_id"]),
        "version_number": row["number"],
        "path": row["path"],
        "title": row["title"],
        "icon": row["icon"] or None,
        "kind": row["kind"],
        "status": row["status"],
        "sha256": row["sha256"] or None,
        "bytes": row["bytes"],
        "frontmatter": row["frontmatter"] or None,
        "provenance": {
            "source_uuid": str(row["id"]),
            "source_version_uuid": str(row["version_id"]),
            "version_number": row["number"],
            "created_at": _iso(row["created_at"]),
            "updated_at": _iso(row["updated_at"]),
            "created_by": row["created_by"],
            "updated_by": row["updated_by"],
            "visibility": row["visibility"],
            "edit_policy": row["edit_policy"],
            "metadata": metadata,
            "version_metadata": row["version_metadata"] or {},
            "change_summary": row["change_summary"],
        },
        "imported": {
            "source_uuid": str(imported.get("source_uuid") or ""),
            "provenance": imported.get("provenance") if isinstance(imported.get("provenance"), dict) else None,
            "sha256": str(imported.get("sha256") or ""),
        }
        if isinstance(imported, dict)
        else None,
    }


def inventory_page(*, actor: Actor, slug: str, cursor: UUID | None, limit: int = INVENTORY_PAGE) -> dict[str, Any]:
    """One page of active documents ordered by id, without bodies; `next_cursor` is the last id."""
    namespace = _export_namespace(actor, slug)
    queryset = Document.objects.filter(namespace=namespace, archived=False).order_by("id")
    total = queryset.count()
    if cursor is not None:
        queryset = queryset.filter(id__gt=cursor)
    names = list(_ENTRY_FIELDS)
    rows = [dict(zip(names, row, strict=True)) for row in queryset.values_list(*_ENTRY_FIELDS.values())[: limit + 1]]
    more = len(rows) > limit
    rows = rows[:limit]
    return {
        "namespace": {
            "slug": namespace.slug,
            "display_name": namespace.display_name,
            "description": namespace.description or None,
            "kind": namespace.kind,
            "provenance": _namespace_provenance(namespace),
        },
        "entries": [_entry(row) for row in rows if row["version_id"]],
        "total": total,
        "next_cursor": str(rows[-1]["id"]) if more and rows else None,
    }


def bodies(*, actor: Actor, slug: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Bodies of current or past versions, each verified against its stored sha256.

    The answer stays near 9 MiB: once the budget is spent, further items are `deferred` and the
    client asks again. At least one body is always returned, so progress never stalls.
    """
    namespace = _export_namespace(actor, slug)
    results: list[dict[str, Any]] = []
    spent = 0
    for item in items:
        document_id, version_id = str(item["document_id"]), str(item["version_id"])
        entry: dict[str, Any] = {"document_id": document_id, "version_id": version_id}
        version = (
            DocumentVersion.objects.filter(
                pk=item["version_id"], document_id=item["document_id"], document__namespace=namespace
            )
            .filter(document__archived=False)
            .defer("content")
            .first()
        )
        if version is None:
            results.append({**entry, "status": "missing"})
            continue
        if version.byte_length > fmt.MAX_DOCUMENT_BYTES:
            results.append({**entry, "status": "too_large", "bytes": version.byte_length})
            continue
        if results and spent + version.byte_length > RESPONSE_BUDGET_BYTES:
            results.append({**entry, "status": "deferred"})
            continue
        content = DocumentVersion.objects.filter(pk=version.pk).values_list("content", flat=True).first() or ""
        encoded = content.encode("utf-8")
        digest = hashlib.sha256(encoded).hexdigest()
        if version.sha256 and digest != version.sha256:
            results.append({**entry, "status": "checksum_mismatch"})
            continue
        spent += len(json.dumps(content))
        results.append({**entry, "status": "ok", "sha256": digest, "bytes": len(encoded), "content": content})
    return results


# --- import: destination namespace ---------------------------------------------------------


def _plan_digest(*, display_name: str, description: str, provenance: dict[str, Any], documents: int, size: int) -> str:
    return _digest(
        {
            "display_name": display_name,
            "description": description,
            "provenance": provenance,
            "documents": documents,
            "request_bytes": size,
        }
    )


def _check_destination(namespace_import: NamespaceImport, actor: Actor) -> Namespace:
    """The destination must still be exactly what the import created: private, owned, unshared."""
    namespace = namespace_import.namespace
    grants = list(NamespaceACL.objects.filter(namespace=namespace).values_list("user_id", "group_id", "permission"))
    if (
        namespace.archived
        or namespace.owner_id != actor.user_id
        or namespace.others_can != OthersCan.NONE
        or namespace.visibility_default != Visibility.PRIVATE
        or grants != [(actor.user_id, None, Permission.OWN)]
        or namespace.display_name != namespace_import.display_name
        or namespace.description != namespace_import.description
    ):
        raise DestinationChanged()
    return namespace


def _find_import(*, actor: Actor, slug: str, bundle: str) -> NamespaceImport | None:
    """The caller's import of this bundle at this slug, None when the slug is free; else 409."""
    namespace = Namespace.objects.filter(workspace=actor.workspace, slug=slug).first()
    if namespace is None:
        return None
    found = NamespaceImport.objects.filter(namespace=namespace).select_related("namespace", "namespace__owner").first()
    if found is None or found.user_id != actor.user_id or found.bundle != bundle:
        raise NamespaceExists()
    return found


def import_namespace(
    *,
    actor: Actor,
    bundle: str,
    slug: str,
    display_name: str,
    description: str,
    provenance: dict[str, Any],
    documents: int,
    request_bytes: int,
    resume: bool,
) -> tuple[NamespaceImport, bool]:
    """Create the private destination namespace (owned by the importer) and its import record."""
    if documents > fmt.MAX_DOCUMENTS or request_bytes > fmt.MAX_TOTAL_REQUEST_BYTES:
        raise TransferLimit(limit_documents=fmt.MAX_DOCUMENTS, limit_bytes=fmt.MAX_TOTAL_REQUEST_BYTES)
    digest = _plan_digest(
        display_name=display_name,
        description=description,
        provenance=provenance,
        documents=documents,
        size=request_bytes,
    )
    existing = _find_import(actor=actor, slug=slug, bundle=bundle)
    if existing is not None:
        if not resume:
            raise ImportExists()
        if existing.plan_digest != digest:
            raise ImportPlanChanged()
        _check_destination(existing, actor)
        return existing, False
    try:
        with transaction.atomic():
            namespace = workspace_services.namespace_create(
                actor=actor,
                slug=slug,
                display_name=display_name or slug,
                description=description,
                kind=NamespaceKind.GLOBAL,
                visibility_default=Visibility.PRIVATE,
                others_can=OthersCan.NONE,
                metadata={"knowledge_import": {"bundle": bundle, "provenance": provenance}},
            )
            record = NamespaceImport.objects.create(
                workspace=actor.workspace,
                namespace=namespace,
                user=actor.user,
                bundle=bundle,
                plan_digest=digest,
                display_name=namespace.display_name,
                description=namespace.description,
                documents=documents,
                request_bytes=request_bytes,
            )
    except (IntegrityError, DomainError) as exc:
        if isinstance(exc, DomainError) and exc.code != "slug_taken":
            raise
        # A concurrent request won the slug: it is either this same import or an unrelated one.
        again = _find_import(actor=actor, slug=slug, bundle=bundle)
        if again is None:
            raise NamespaceExists() from exc
        return again, False
    return record, True


def _destination(*, actor: Actor, slug: str, bundle: str) -> NamespaceImport:
    found = _find_import(actor=actor, slug=slug, bundle=bundle)
    if found is None:
        raise NotFound("Namespace not found.")
    _check_destination(found, actor)
    return found


# --- import: receipts ----------------------------------------------------------------------


def _document_digest(item: dict[str, Any]) -> str:
    return _digest(
        {
            "key": item["key"],
            "source_id": str(item["source_id"]),
            "path": item["path"],
            "title": _clean_title(item["title"]),
            "icon": (item.get("icon") or "").strip(),
            "kind": item["kind"],
            "status": item["status"],
            "visibility": Visibility.PRIVATE,
            "edit_policy": "owner",
            "sha256": item["sha256"],
        }
    )


def _clean_title(title: str) -> str:
    return title.strip()[:500]


def _receipt_unchanged(receipt: ImportReceipt, expected: dict[str, Any] | None = None) -> bool:
    """Is the imported document still exactly as imported? (renamed, edited or archived -> no)."""
    document = receipt.document
    version = document.current_version
    planned = expected or (document.metadata or {}).get("knowledge_import", {}).get("planned") or {}
    return bool(
        not document.archived
        and version is not None
        and version.number == 1
        and planned
        and document.path == planned.get("path")
        and document.title == _clean_title(planned.get("title") or "")
        and document.icon == (planned.get("icon") or "").strip()
        and document.kind == planned.get("kind")
        and document.status == planned.get("status")
        and document.visibility == Visibility.PRIVATE
        and document.edit_policy == "owner"
        and version.sha256 == planned.get("sha256")
    )


# What `_receipt_unchanged` and `_receipt_row` read (not the versions' other columns).
RECEIPT_CHECK_FIELDS = (
    "key",
    "document_id",
    "digest",
    "reconciled",
    *(
        f"document__{name}"
        for name in ("archived", "path", "title", "icon", "kind", "status", "visibility", "edit_policy", "metadata")
    ),
    "document__current_version__number",
    "document__current_version__sha256",
)


def _receipt_row(receipt: ImportReceipt) -> dict[str, Any]:
    return {
        "key": receipt.key,
        "document_id": str(receipt.document_id),
        "digest": receipt.digest,
        "unchanged": _receipt_unchanged(receipt),
        "reconciled": receipt.reconciled,
    }


def import_status(
    *, actor: Actor, slug: str, bundle: str, cursor: str | None, limit: int = INVENTORY_PAGE
) -> dict[str, Any]:
    """The destination's receipts for this bundle (cursor-paged by key); empty when the slug is free."""
    found = _find_import(actor=actor, slug=slug, bundle=bundle)
    if found is None:
        return {"namespace": None, "receipts": [], "total": 0, "next_cursor": None}
    namespace = _check_destination(found, actor)
    queryset = (
        ImportReceipt.objects.filter(namespace_import=found)
        .select_related("document", "document__current_version")
        .only(*RECEIPT_CHECK_FIELDS)
        .order_by("key")
    )
    total = queryset.count()
    if cursor:
        queryset = queryset.filter(key__gt=cursor)
    rows = list(queryset[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return {
        "namespace": {
            "slug": namespace.slug,
            "display_name": namespace.display_name,
            "description": namespace.description or None,
            "documents": found.documents,
            "request_bytes": found.request_bytes,
        },
        "receipts": [_receipt_row(receipt) for receipt in rows],
        "total": total,
        "next_cursor": rows[-1].key if more and rows else None,
    }


def _item_error(item: dict[str, Any], exc: DomainError) -> dict[str, Any]:
    return {"key": item["key"], "status": "error", "http_status": exc.http_status, "code": exc.code}


def _import_one(
    *, actor: Actor, found: NamespaceImport, namespace: Namespace, bundle: str, item: dict[str, Any], receipted: bool
) -> dict[str, Any]:
    content: str = item["content"]
    if "\x00" in content:
        raise Invalid("Document content may not contain NUL characters.", code="invalid_content")
    encoded = content.encode("utf-8")
    if hashlib.sha256(encoded).hexdigest() != item["sha256"] or len(encoded) != item["bytes"]:
        raise Invalid("Content does not match the transfer plan.", code="checksum_mismatch")
    digest = _document_digest(item)
    planned = {key: item.get(key) for key in ("path", "title", "icon", "kind", "status", "sha256")}
    item_bytes = len(fmt.canonical_json(item))
    with transaction.atomic():
        receipt = (
            ImportReceipt.objects.filter(namespace_import=found, key=item["key"])
            .select_related("document", "document__current_version")
            .defer("document__current_version__content")
            .first()
            if receipted
            else None
        )
        if receipt is not None:
            if receipt.digest != digest:
                raise ImportPlanChanged()
            if not _receipt_unchanged(receipt, planned):
                raise ImportedDocumentChanged()
            return {"key": item["key"], "status": "skipped", "document_id": str(receipt.document_id)}
        document = knowledge_services.document_create(
            actor=actor,
            namespace=namespace,
            path=item["path"],
            content=content,
            title=_clean_title(item["title"]),
            icon=item.get("icon") or "",
            kind=item["kind"],
            visibility=Visibility.PRIVATE,
            status=item["status"],
            edit_policy="owner",
            metadata={
                "knowledge_import": {
                    "bundle": bundle,
                    "key": item["key"],
                    "source_uuid": str(item["source_id"]),
                    "sha256": item["sha256"],
                    "planned": planned,
                    "frontmatter": item.get("frontmatter"),
                    "provenance": item.get("provenance") or {},
                }
            },
            first_line_is_title=False,
            change_summary=IMPORT_CHANGE_SUMMARY,
            version_metadata={"knowledge_import": {"bundle": bundle, "key": item["key"]}},
        )
        ImportReceipt.objects.create(
            namespace_import=found,
            key=item["key"],
            document=document,
            source_id=item["source_id"],
            digest=digest,
            request_bytes=item_bytes,
        )
        _count_against_limits(found, item_bytes)
    return {"key": item["key"], "status": "created", "document_id": str(document.pk)}


def _count_against_limits(found: NamespaceImport, item_bytes: int) -> None:
    """Count one created document against the namespace-wide limits, or roll its creation back.

    The last statement of the item's transaction: the import row's lock serializes the accounting
    (a concurrent request's update waits, then re-checks the committed counts) but is held only
    until commit, so parallel import requests create documents side by side.
    """
    counted = NamespaceImport.objects.filter(
        pk=found.pk,
        imported_documents__lt=fmt.MAX_DOCUMENTS,
        imported_bytes__lte=fmt.MAX_TOTAL_REQUEST_BYTES - item_bytes,
    ).update(imported_documents=F("imported_documents") + 1, imported_bytes=F("imported_bytes") + item_bytes)
    if not counted:
        raise TransferLimit(limit_documents=fmt.MAX_DOCUMENTS, limit_bytes=fmt.MAX_TOTAL_REQUEST_BYTES)


def import_documents(*, actor: Actor, bundle: str, slug: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Create each planned document with its receipt, each in its own transaction.

    Per-document problems (a conflict, a checksum mismatch, even an unexpected error) are
    reported per item; namespace-wide ones (limits, a changed destination) fail the request.
    """
    found = _destination(actor=actor, slug=slug, bundle=bundle)
    results: list[dict[str, Any]] = []
    # Reference sync waits for `import_reconcile`, which runs it once per imported document
    # after every planned document exists (instead of once now and again then). The rest of the
    # upkeep (chunks, outlines) goes out once for the request; that block is the inner one, so
    # the reference sync is still deferred when it hands over.
    # Keys with a receipt already (a retried request) are looked up one by one; the others go
    # straight to creation, where a concurrent retry's receipt surfaces as an IntegrityError.
    receipted = set(
        ImportReceipt.objects.filter(namespace_import=found, key__in={item["key"] for item in items}).values_list(
            "key", flat=True
        )
    )
    with graph_hooks.deferred_reference_sync(), knowledge_services.batched_content_hooks():
        for item in items:
            results.append(
                _import_item(actor=actor, found=found, bundle=bundle, item=item, receipted=item["key"] in receipted)
            )
    return results


def _import_item(
    *, actor: Actor, found: NamespaceImport, bundle: str, item: dict[str, Any], receipted: bool
) -> dict[str, Any]:
    try:
        return _import_one(
            actor=actor, found=found, namespace=found.namespace, bundle=bundle, item=item, receipted=receipted
        )
    except TransferLimit:
        raise
    except IntegrityError:
        # A concurrent retry of the same key committed first: its receipt now answers.
        receipt = ImportReceipt.objects.filter(namespace_import=found, key=item["key"]).first()
        if receipt is None:
            return {"key": item["key"], "status": "error", "http_status": 409, "code": "path_taken"}
        return {"key": item["key"], "status": "skipped", "document_id": str(receipt.document_id)}
    except DomainError as exc:
        return _item_error(item, exc)
    except Exception:
        logger.exception("transfer: importing %s failed", item["key"])
        return {"key": item["key"], "status": "error", "http_status": 500, "code": "server_error"}


def import_reconcile(*, actor: Actor, bundle: str, slug: str, keys: list[str]) -> list[dict[str, Any]]:
    """Re-run reference upkeep for imported documents once every planned document exists.

    Links resolved at import time may have pointed at documents not created yet; the reference
    sync queued here (one message for the whole request) resolves them. The request is one
    transaction over a bounded number of keys: the receipts are locked in key order, their link
    targets looked up together, and the reconciled marks written with one update.
    """
    found = _destination(actor=actor, slug=slug, bundle=bundle)
    namespace = found.namespace
    with transaction.atomic():
        # Lock the receipt rows alone (FOR UPDATE may not reach the nullable side of a join),
        # in one order, so that a retried request waits for the first instead of deadlocking.
        locked = set(
            ImportReceipt.objects.select_for_update()
            .filter(namespace_import=found, key__in=set(keys))
            .order_by("key")
            .values_list("pk", flat=True)
        )
        receipts = {
            receipt.key: receipt
            for receipt in ImportReceipt.objects.filter(pk__in=locked)
            .select_related("document")
            .only("key", "reconciled", "reconciled_at", "document__current_version_id")
        }
        targets = _link_targets(receipts.values(), namespace.slug)
        created = _created_at(namespace, {path for paths in targets.values() for path in paths})
        results: list[dict[str, Any]] = []
        sync: dict[UUID, tuple[UUID, UUID | None]] = {}
        for key in keys:
            receipt = receipts.get(key)
            if receipt is None:
                results.append({"key": key, "status": "error", "http_status": 404, "code": "not_found"})
                continue
            document = receipt.document
            paths = targets.get(receipt.document_id, [])
            resolved = [created[path] for path in paths if path in created]
            # An unreconciled document's reference sync was deferred at import: run it now, once.
            # Otherwise only a link to a document created after that reconciliation can be missing.
            if not receipt.reconciled_at or any(when > receipt.reconciled_at for when in resolved):
                sync[document.pk] = (document.pk, document.current_version_id)
            results.append({"key": key, "status": "reconciled", "references": len(paths), "resolved": len(resolved)})
        first_time = [receipt.pk for receipt in receipts.values() if not receipt.reconciled]
        if first_time:
            ImportReceipt.objects.filter(pk__in=first_time).update(reconciled=True, reconciled_at=timezone.now())
        if sync:
            writes = list(sync.values())
            transaction.on_commit(lambda: graph_hooks.on_content_writes(writes))
    return results


def _link_targets(receipts: Any, slug: str) -> dict[UUID, list[str]]:
    """Each receipted document's link targets in `slug`, reading bodies a few at a time."""
    versions = {receipt.document.current_version_id: receipt.document_id for receipt in receipts}
    versions.pop(None, None)
    targets: dict[UUID, list[str]] = {}
    rows = DocumentVersion.objects.filter(pk__in=list(versions)).values_list("pk", "content")
    for version_id, content in rows.iterator(chunk_size=16):
        targets[versions[version_id]] = fmt.link_targets(content, slug)
    return targets


def _created_at(namespace: Namespace, paths: set[str]) -> dict[str, Any]:
    """Creation times of the namespace's active documents at these paths."""
    found: dict[str, Any] = {}
    ordered = sorted(paths)
    for start in range(0, len(ordered), 500):
        found.update(
            Document.objects.filter(
                namespace=namespace, archived=False, path__in=ordered[start : start + 500]
            ).values_list("path", "created_at")
        )
    return found
