"""Celery tasks for embeddings: thin wrappers over knowledge.embeddings.pipeline.

Messages carry ids only; workers read everything else (content, policy, key) from the database
after re-entering the workspace. Delivery is at least once: claims make a repeat harmless.
"""

from __future__ import annotations

import time
from typing import Any

from celery import shared_task

BATCH_BUDGET_SECONDS = 20.0


@shared_task(ignore_result=True)
def sync_embedding_chunks_task(document_id: str) -> int:
    """After a content write or restore: chunk the current version, then wake an embedding worker."""
    from knowledge.embeddings import pipeline
    from knowledge.models import Document

    written = pipeline.chunks_sync(document_id)
    workspace_id = Document.objects.filter(pk=document_id).values_list("namespace__workspace_id", flat=True).first()
    if workspace_id is not None and pipeline.has_claimable(workspace_id):
        embed_workspace_task.delay(workspace_id)
    return written


@shared_task(ignore_result=True)
def embed_workspace_task(workspace_id: int) -> dict[str, Any]:
    """Embed one workspace's pending chunks for a bounded time, then hand the rest to a new message."""
    from knowledge.embeddings import pipeline

    totals = pipeline.BatchResult()
    started = time.monotonic()
    while time.monotonic() - started < BATCH_BUDGET_SECONDS:
        result = pipeline.embed_batch(workspace_id)
        for name in ("claimed", "embedded", "reused", "failed", "stale", "provider_calls"):
            setattr(totals, name, getattr(totals, name) + getattr(result, name))
        totals.error = result.error or totals.error
        if result.claimed == 0 or result.error:
            break
        if pipeline.multi_workspace():
            break  # one batch per message, so other workspaces' messages interleave
    else:
        embed_workspace_task.delay(workspace_id)
    if pipeline.multi_workspace() and totals.claimed and not totals.error and pipeline.has_claimable(workspace_id):
        embed_workspace_task.delay(workspace_id)
    return totals.as_dict()


@shared_task(ignore_result=True)
def poll_embeddings_task() -> list[int]:
    """Celery beat: wake a worker for every workspace with claimable work (recovers expired leases)."""
    from knowledge.embeddings import pipeline, store

    if store.is_ready():
        store.sweep_orphans()
    workspaces = pipeline.workspaces_with_work()
    for workspace_id in workspaces:
        embed_workspace_task.delay(workspace_id)
    return workspaces


@shared_task(ignore_result=True)
def reindex_workspace_task(workspace_id: int) -> dict[str, int]:
    """Admin reindex: rebuild the workspace's chunks, then wake an embedding worker."""
    from knowledge.embeddings import pipeline

    result = pipeline.reindex(workspace_id)
    if pipeline.has_claimable(workspace_id):
        embed_workspace_task.delay(workspace_id)
    return result
