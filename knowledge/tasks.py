"""Celery tasks of the knowledge app: thin wrappers over the embedding pipeline and outline upkeep.

Messages carry ids only; workers read everything else (content, policy, key) from the database
after re-entering the workspace. Delivery is at least once: claims make a repeat harmless.

Eager Celery (`make run`, tests, no broker) runs a queued task inside the caller, so a task that
re-queued itself would recurse once per hand-over; there the hand-over is a loop instead.
"""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task
from celery.utils.log import get_task_logger
from kombu.exceptions import OperationalError as BrokerError

logger = get_task_logger(__name__)

SYNC_MAX_RETRIES = 5


def _runs_inline(task: Task) -> bool:
    """No broker to hand over to: this message runs eagerly, inside whoever queued it."""
    return bool(task.request.is_eager or task.app.conf.task_always_eager)


def _sync_embedding_chunks_failure(
    self: Task, exc: BaseException, task_id: str, args: tuple[Any, ...], kwargs: dict[str, Any], einfo: Any
) -> None:
    """Out of retries, or a permanent error: record it; the poll's sweep chunks the document again later."""
    from knowledge.embeddings import pipeline

    document_id = args[0] if args else kwargs.get("document_id")
    if document_id is not None:
        pipeline.sync_failed(document_id, exc)


@shared_task(bind=True, ignore_result=True, max_retries=SYNC_MAX_RETRIES, on_failure=_sync_embedding_chunks_failure)
def sync_embedding_chunks_task(self: Task, document_id: str) -> int:
    """After a content write or restore: chunk the current version, then wake an embedding worker.

    Transient failures (database, provider) retry with jittered exponential backoff; the rest fail
    at once and are recorded by `_sync_embedding_chunks_failure`.
    """
    from knowledge.embeddings import pipeline
    from knowledge.models import Document

    try:
        written = pipeline.chunks_sync(document_id)
        workspace_id = Document.objects.filter(pk=document_id).values_list("namespace__workspace_id", flat=True).first()
        wake = workspace_id is not None and pipeline.has_claimable(workspace_id)
    except Exception as exc:
        if not pipeline.retryable(exc):
            raise
        logger.warning("chunking document %s failed (retry %s): %s", document_id, self.request.retries, exc)
        raise self.retry(exc=exc, countdown=pipeline.retry_countdown(exc, self.request.retries)) from exc
    if wake:
        embed_workspace_task.delay(workspace_id)
    return written


@shared_task(ignore_result=True)
def sync_embedding_chunks_many_task(document_ids: list[str]) -> int:
    """After a bulk write (an import request): chunk its documents in batches, then wake the workers.

    On any failure each document gets its own `sync_embedding_chunks_task`, with that task's
    retries and failure record; documents already chunked make those a no-op.
    """
    from knowledge.embeddings import pipeline
    from knowledge.models import Document

    try:
        written = pipeline.chunks_sync_many(document_ids)
        workspace_ids = set(
            Document.objects.filter(pk__in=document_ids).values_list("namespace__workspace_id", flat=True)
        )
        waking = [workspace_id for workspace_id in sorted(workspace_ids) if pipeline.has_claimable(workspace_id)]
    except Exception as exc:
        logger.warning("chunking %s documents together failed, queueing them one by one: %s", len(document_ids), exc)
        for document_id in document_ids:
            sync_embedding_chunks_task.delay(document_id)
        return 0
    for workspace_id in waking:
        embed_workspace_task.delay(workspace_id)
    return written


@shared_task(bind=True, ignore_result=True)
def embed_workspace_task(self: Task, workspace_id: int, max_batches: int | None = None) -> dict[str, Any]:
    """Embed a workspace's pending chunks one bounded slice per message, handing the rest over.

    A slice ends after `max_batches` batches (default: `pipeline.slice_batches()`) or its time
    budget. With a broker the next slice is a new message (so other workspaces interleave);
    eagerly it runs here. Chunks backing off after a transient provider failure get a delayed
    message for when their backoff ends, so they need not wait for the poll; a message that
    found nothing to claim schedules none, which ends duplicate chains.
    """
    from knowledge.embeddings import pipeline

    pipeline.requeue_failed(workspace_id)
    totals = pipeline.BatchResult()
    while True:
        result, more = pipeline.embed_slice(workspace_id, max_batches=max_batches)
        totals.add(result)
        if not more:
            break
        if not _runs_inline(self):
            embed_workspace_task.delay(workspace_id, max_batches)
            return totals.as_dict()
    if totals.claimed and not _runs_inline(self):
        _wake_after_backoff(workspace_id, max_batches)
    return totals.as_dict()


def _wake_after_backoff(workspace_id: int, max_batches: int | None) -> None:
    """A delayed message for when the workspace's first backed-off chunk may be claimed again."""
    from knowledge.embeddings import pipeline

    wait = pipeline.seconds_until_retry(workspace_id)
    if wait is None or wait > pipeline.MAX_BACKOFF_SECONDS:
        return  # nothing waits, or it waits long enough for the poll to pick it up
    try:
        embed_workspace_task.apply_async((workspace_id, max_batches), countdown=wait + 0.05)
    except BrokerError:
        logger.warning("could not schedule the retry of workspace %s; the poll will pick it up", workspace_id)


@shared_task(ignore_result=True)
def poll_embeddings_task() -> list[int]:
    """Celery beat: the sweep. Re-queues failed work whose cool-down is over, chunks documents whose
    chunk sync failed or was lost, and wakes a worker for every workspace with claimable work
    (which also recovers expired leases)."""
    from knowledge.embeddings import pipeline, store

    if store.is_ready():
        store.sweep_orphans()
    pipeline.requeue_failed()
    for document_id in pipeline.stale_documents():
        sync_embedding_chunks_task.delay(document_id)
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


@shared_task(ignore_result=True)
def store_outline_task(version_id: str) -> bool:
    """After a content write: store the new version's outline, so its first read is a lookup.

    Returns whether the version still exists (it may have been purged since).
    """
    return store_outlines_task([version_id]) == 1


@shared_task(ignore_result=True)
def store_outlines_task(version_ids: list[str]) -> int:
    """`store_outline_task` for a bulk write's versions; returns how many still exist."""
    from knowledge import services

    return services.version_outlines_store(version_ids=version_ids)


@shared_task(ignore_result=True)
def flush_search_pending_task() -> int:
    """After a large write: merge the text index's pending entries, which the write left for us."""
    from knowledge import search

    return search.flush_pending_entries()


@shared_task(ignore_result=True)
def fan_out_task(tasks: list[dict[str, Any]]) -> int:
    """Queue each task of one save's upkeep message on its own (see `hooks.one_message`), so each
    keeps its own retries; returns how many were queued. Eager, each runs here, and one that
    fails does not stop the others."""
    from celery import signature

    queued = 0
    for task in tasks:
        try:
            signature(task).apply_async()
            queued += 1
        except Exception:
            logger.exception("upkeep: could not queue %s", task.get("task"))
    return queued
