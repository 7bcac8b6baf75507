"""Celery tasks: thin wrappers that call graph services (eager in the embedded default and tests)."""

from __future__ import annotations

from typing import Any

from celery import shared_task


@shared_task(ignore_result=True)
def sync_references_task(document_id: str, version_id: str | None = None) -> dict[str, Any] | None:
    """After a content write: mirror the version's links as `references` edges (best-effort)."""
    from graph import services

    result = services.references_sync(document_id=document_id, version_id=version_id)
    return result.as_dict() if result else None


@shared_task(ignore_result=True)
def sync_references_many_task(writes: list[list[str | None]]) -> int:
    """The reference sync of many documents, one after another; returns how many synced.

    Each document is its own sync (and transaction): a failure is logged and recorded for that
    document alone, as in `sync_references_task`.
    """
    from graph import services

    synced = 0
    for document_id, version_id in writes:
        if services.references_sync(document_id=str(document_id), version_id=version_id) is not None:
            synced += 1
    return synced


@shared_task(ignore_result=True)
def resolve_pending_links_task(document_id: str) -> int:
    """After a move or restore: links written to the document's new path become edges."""
    from graph import services

    return services.pending_links_resolve(document_id=document_id)


@shared_task(ignore_result=True)
def resolve_namespace_pending_links_task(namespace_id: int) -> int:
    """After a namespace restore: links written to its documents' paths meanwhile become edges."""
    from graph import services

    return services.pending_links_resolve_namespace(namespace_id=namespace_id)


@shared_task(ignore_result=True)
def reconcile_links_task(namespace: str | None = None, workspace: str | None = None) -> dict[str, int]:
    """Rebuild every document's references (what `manage.py kb_reconcile_links` runs inline)."""
    from graph import services

    return services.links_reconcile(namespace=namespace, workspace=workspace)
