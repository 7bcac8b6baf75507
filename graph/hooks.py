"""Connects graph upkeep to knowledge's after-commit callbacks (called from GraphConfig.ready).

Callbacks run inside `transaction.on_commit` of the request that saved; an exception here
would surface in that request after its data is committed, so every failure (a broker that is
down, a task that raises in eager mode) is logged and swallowed.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from uuid import UUID

logger = logging.getLogger(__name__)

# Set while a caller (a namespace import batch) promises to run the reference sync itself later.
_reference_sync_deferred: contextvars.ContextVar[bool] = contextvars.ContextVar("graph_sync_deferred", default=False)


@contextlib.contextmanager
def deferred_reference_sync() -> Iterator[None]:
    """Skip the per-write reference sync for content writes committed inside this block.

    The caller must sync every document written here afterwards (`references_sync`), as the
    transfer import's reconcile step does once every planned document exists.
    """
    token = _reference_sync_deferred.set(True)
    try:
        yield
    finally:
        _reference_sync_deferred.reset(token)


def on_content_write(document_id: UUID, version_id: UUID | None) -> None:
    from graph.tasks import sync_references_task
    from knowledge.hooks import enqueue

    if _reference_sync_deferred.get():
        return
    try:
        enqueue(sync_references_task.s(str(document_id), str(version_id) if version_id else None))
    except Exception:
        logger.exception("graph: could not queue the reference sync of document %s", document_id)


def on_content_writes(writes: list[tuple[UUID, UUID | None]]) -> None:
    """The reference sync of many writes, in one message (a bulk import's reconcile step)."""
    from graph.tasks import sync_references_many_task

    if _reference_sync_deferred.get() or not writes:
        return
    try:
        sync_references_many_task.delay([[str(d), str(v) if v else None] for d, v in writes])
    except Exception:
        logger.exception("graph: could not queue the reference sync of %s documents", len(writes))


on_content_write.many = on_content_writes  # type: ignore[attr-defined]


def on_path_change(document_id: UUID, *_: object) -> None:
    from graph.tasks import resolve_pending_links_task

    try:
        resolve_pending_links_task.delay(str(document_id))
    except Exception:
        logger.exception("graph: could not queue pending-link resolution for document %s", document_id)


def on_namespace_restore(namespace_id: int, *_: object) -> None:
    from graph.tasks import resolve_namespace_pending_links_task

    try:
        resolve_namespace_pending_links_task.delay(namespace_id)
    except Exception:
        logger.exception("graph: could not queue pending-link resolution for namespace %s", namespace_id)


def _attach(hooks: object, callback: object) -> None:
    if isinstance(hooks, list) and callback not in hooks:
        hooks.append(callback)


def connect() -> None:
    """Register once (idempotent: `ready()` can run more than once in tests and reloads)."""
    from knowledge import services

    _attach(services.after_content_write, on_content_write)
    # Moves/restores and namespace restores, once knowledge.services offers these hook lists.
    _attach(getattr(services, "after_path_change", None), on_path_change)
    _attach(getattr(services, "after_namespace_restore", None), on_namespace_restore)
