"""Connects the embedding pipeline to knowledge's after-commit callbacks and to policy changes.

Like graph upkeep, this is best-effort inside the saving request: a broker that is down is
logged and swallowed (the beat poll picks the work up later), never a failed save.
"""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

logger = logging.getLogger(__name__)


def on_content_write(document_id: UUID, *_: object) -> None:
    from knowledge.hooks import enqueue
    from knowledge.tasks import sync_embedding_chunks_task

    try:
        enqueue(sync_embedding_chunks_task.s(str(document_id)))
    except Exception:
        logger.exception("embeddings: could not queue chunking of document %s", document_id)


def on_content_writes(writes: list[tuple[UUID, UUID]]) -> None:
    """A bulk write's chunking, in one message."""
    from knowledge.tasks import sync_embedding_chunks_many_task

    try:
        sync_embedding_chunks_many_task.delay([str(document_id) for document_id, _ in writes])
    except Exception:
        logger.exception("embeddings: could not queue chunking of %s documents", len(writes))


on_content_write.many = on_content_writes  # type: ignore[attr-defined]


def on_policy_change(workspace_id: int, before: dict[str, Any], after: dict[str, Any], key_changed: bool) -> None:
    from knowledge.embeddings import pipeline
    from knowledge.tasks import embed_workspace_task

    try:
        pipeline.policy_changed(workspace_id, before, after, key_changed)
        if pipeline.has_claimable(workspace_id):
            embed_workspace_task.delay(workspace_id)
    except Exception:
        logger.exception("embeddings: could not apply the policy change of workspace %s", workspace_id)


def vector_store_problem() -> str | None:
    from knowledge.embeddings import store

    if store.is_ready():  # remembered per process once true: every semantic query asks
        return None
    vectors = store.status()
    return None if vectors.ready else f"{vectors.reason} {vectors.hint}"


def connect() -> None:
    from knowledge import services
    from knowledge.hooks import attach
    from workspaces import semantic

    semantic.vector_store_problem = vector_store_problem
    attach(services.after_content_write, on_content_write)
    attach(services.after_path_change, on_content_write)  # a restore makes its chunks claimable again
    attach(semantic.after_policy_change, on_policy_change)
