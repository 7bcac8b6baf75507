"""Eager Celery indexes a big workspace to the end; failed chunk syncs retry, show, and are swept.

The provider is the loopback embeddings server; the database is this test's own. Faults in the
database are injected by wrapping `pipeline.chunks_sync`; provider faults come from the server.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from knowledge import tasks
from knowledge.embeddings import pipeline
from knowledge.models import ChunkState, ChunkSyncFailure, EmbeddingChunk
from knowledge.tasks import embed_workspace_task, poll_embeddings_task
from tests.conftest import create_document, create_namespace
from tests.knowledge.semantic_helpers import enable, postgres_only, status

pytestmark = pytest.mark.django_db(transaction=True)
SECTIONS = 300  # one chunk each, one chunk per batch, one batch per slice: 300 hand-overs


def current_chunks(document_id: str):
    return EmbeddingChunk.objects.filter(document_id=document_id, version_id=current_version(document_id))


def current_version(document_id: str):
    from knowledge.models import Document

    return Document.objects.values_list("current_version_id", flat=True).get(pk=document_id)


def fresh_state() -> str:
    """What a chunk of the current version ends as once its sync and embedding succeed."""
    return ChunkState.EMBEDDED if connection.vendor == "postgresql" else ChunkState.PENDING


@pytest.fixture
def flaky_sync(monkeypatch):
    """`fail(exc, times)`: the next `times` chunk syncs raise `exc`; `calls` counts all of them."""
    real = pipeline.chunks_sync
    state = {"faults": [], "calls": 0}

    def chunks_sync(document_id, **kwargs):
        state["calls"] += 1
        if state["faults"]:
            raise state["faults"].pop(0)
        return real(document_id, **kwargs)

    def fail(exc: BaseException, times: int = 1) -> None:
        state["faults"].extend([exc] * times)

    monkeypatch.setattr(pipeline, "chunks_sync", chunks_sync)
    state["fail"] = fail
    return state


@postgres_only
def test_eager_indexing_runs_hundreds_of_hand_overs_to_the_end(http, semantic_admin, embedder, settings, monkeypatch):
    settings.KNOWLEDGE_EMBEDDING_SLICE_BATCHES = 1
    enable(http, semantic_admin, embedder, chunking={"min_tokens": 1}, indexing={"paused": True, "batch_size": 1})
    create_namespace(http, semantic_admin, "big")
    content = "".join(f"# Section {n}\n\nWords about topic number {n}.\n\n" for n in range(SECTIONS))
    create_document(http, semantic_admin, "big", "big/many.md", content)
    assert EmbeddingChunk.objects.filter(state=ChunkState.PENDING).count() == SECTIONS
    slices = []
    real_slice = pipeline.embed_slice
    monkeypatch.setattr(pipeline, "embed_slice", lambda *a, **k: slices.append(1) or real_slice(*a, **k))
    calls = len(embedder.calls)

    enable(http, semantic_admin, embedder, indexing={"paused": False, "batch_size": 1})  # its hook wakes the worker

    assert EmbeddingChunk.objects.filter(state=ChunkState.EMBEDDED).count() == SECTIONS
    assert len(slices) > 250
    assert len(embedder.calls) - calls == SECTIONS and all(len(c.inputs) == 1 for c in embedder.calls[calls:])


@postgres_only
def test_with_a_broker_a_slice_hands_over_instead_of_looping(http, semantic_admin, embedder, settings, monkeypatch):
    enable(http, semantic_admin, embedder, indexing={"paused": True, "batch_size": 2})
    create_namespace(http, semantic_admin, "notes")
    for n in range(5):
        create_document(http, semantic_admin, "notes", f"n{n}.md", f"# Note {n}\n\nBody of note {n}.\n")
    enable(http, semantic_admin, embedder, indexing={"paused": False, "batch_size": 2})  # eager: all embedded
    EmbeddingChunk.objects.update(state=ChunkState.PENDING)
    sent = []
    monkeypatch.setattr(embed_workspace_task, "delay", lambda *args: sent.append(args))
    monkeypatch.setattr(tasks, "_runs_inline", lambda task: False)  # as on a worker fed by a broker
    workspace_id = semantic_admin.workspace.pk

    result = embed_workspace_task.run(workspace_id, 2)

    assert result["claimed"] == 4 and sent == [(workspace_id, 2)]  # two batches of two, then a new message
    assert EmbeddingChunk.objects.filter(state=ChunkState.PENDING).count() == 1


def test_a_transient_database_failure_in_chunk_sync_is_retried(http, semantic_admin, embedder, flaky_sync):
    create_namespace(http, semantic_admin, "notes")
    flaky_sync["fail"](OperationalError("server closed the connection unexpectedly"), times=2)
    document = create_document(http, semantic_admin, "notes", "a.md", "# Alpha\n\nFirst words.\n")
    assert flaky_sync["calls"] == 3  # two failures, then the retry that worked
    chunk = current_chunks(document["id"]).get()
    assert chunk.state == fresh_state() and chunk.last_error == ""
    assert status(http, semantic_admin)["unsynced_documents"] == 0


def test_retries_back_off_with_jitter_and_honour_retry_after():
    from knowledge.embeddings.providers import ProviderError

    waits = [pipeline.retry_countdown(OperationalError("gone"), retries) for retries in range(5) for _ in range(20)]
    assert all(0 <= wait <= pipeline.SYNC_MAX_BACKOFF_SECONDS for wait in waits) and len(set(waits)) > 1
    assert max(pipeline.retry_countdown(OperationalError("gone"), 0) for _ in range(50)) <= 2.0
    slow = ProviderError("slow down", code="rate_limited", retryable=True, retry_after=7.0)
    assert pipeline.retry_countdown(slow, 3) == 7.0
    assert pipeline.retryable(slow) and pipeline.retryable(OperationalError("deadlock detected"))
    assert not pipeline.retryable(ProviderError("no", code="auth_failed", retryable=False))
    assert not pipeline.retryable(ValueError("a bug"))


def test_a_chunk_sync_out_of_retries_is_shown_and_swept_again(http, semantic_admin, embedder, flaky_sync):
    create_namespace(http, semantic_admin, "notes")
    document = create_document(http, semantic_admin, "notes", "a.md", "# Alpha\n\nFirst words.\n")
    flaky_sync["fail"](OperationalError("the database is down"), times=6)  # the first try and five retries
    revised = http.as_(semantic_admin).post(
        f"/kb/documents/{document['id']}/revise", json={"content": "# Alpha\n\nSecond words.\n"}
    )
    assert revised.status_code == 200, revised.text
    assert not current_chunks(document["id"]).exists()
    old = EmbeddingChunk.objects.get(document_id=document["id"])  # the previous version's, never claimable
    assert old.state == ChunkState.FAILED and old.last_error == "sync_failed: OperationalError"
    report = status(http, semantic_admin)
    assert report["unsynced_documents"] == 1 and report["chunks"]["failed"] == 1
    assert report["last_error"] == "sync_failed: OperationalError"

    poll_embeddings_task.delay()  # cooling down: not yet
    assert not current_chunks(document["id"]).exists()
    ChunkSyncFailure.objects.update(available_at=timezone.now() - timedelta(seconds=1))
    poll_embeddings_task.delay()

    chunk = current_chunks(document["id"]).get()
    assert chunk.state == fresh_state() and "Second words" in chunk.text
    assert EmbeddingChunk.objects.filter(document_id=document["id"]).count() == 1
    report = status(http, semantic_admin)
    assert report["unsynced_documents"] == 0 and report["chunks"]["failed"] == 0


def test_a_permanent_chunk_sync_failure_fails_at_once_and_is_swept(http, semantic_admin, embedder, flaky_sync):
    create_namespace(http, semantic_admin, "notes")
    flaky_sync["fail"](ValueError("a chunker bug"))
    document = create_document(http, semantic_admin, "notes", "a.md", "# Alpha\n\nFirst words.\n")
    assert flaky_sync["calls"] == 1  # not retried
    assert not EmbeddingChunk.objects.filter(document_id=document["id"]).exists()
    assert status(http, semantic_admin)["unsynced_documents"] == 1
    blank = create_document(http, semantic_admin, "notes", "blank.md", "   \n")  # no chunks, and not stale
    ChunkSyncFailure.objects.update(available_at=timezone.now() - timedelta(seconds=1))  # cooled down
    assert pipeline.stale_documents() == [document["id"]]

    poll_embeddings_task.delay()

    assert current_chunks(document["id"]).get().state == fresh_state()
    assert not EmbeddingChunk.objects.filter(document_id=blank["id"]).exists()
    assert status(http, semantic_admin)["unsynced_documents"] == 0 and pipeline.stale_documents() == []


def test_a_failed_first_chunk_sync_cools_down_before_the_sweep_tries_again(http, semantic_admin, embedder, flaky_sync):
    create_namespace(http, semantic_admin, "notes")
    flaky_sync["fail"](ValueError("a chunker bug"))
    document = create_document(http, semantic_admin, "notes", "a.md", "# Alpha\n\nFirst words.\n")
    assert not EmbeddingChunk.objects.filter(document_id=document["id"]).exists()  # no row to hold the failure
    report = status(http, semantic_admin)
    assert report["unsynced_documents"] == 1 and report["last_error"] == "sync_failed: ValueError"

    for _ in range(3):  # polls during the cool-down do not chunk it again
        poll_embeddings_task.delay()
    assert flaky_sync["calls"] == 1 and pipeline.stale_documents() == []
    ChunkSyncFailure.objects.update(available_at=timezone.now() - timedelta(seconds=1))
    poll_embeddings_task.delay()

    assert flaky_sync["calls"] == 2 and current_chunks(document["id"]).get().state == fresh_state()
    report = status(http, semantic_admin)
    assert report["unsynced_documents"] == 0 and report["last_error"] is None
    assert not ChunkSyncFailure.objects.exists()


@postgres_only
def test_a_permanent_provider_failure_is_shown_and_swept_after_its_cool_down(http, semantic_admin, embedder):
    create_namespace(http, semantic_admin, "notes")
    embedder.fail_next(400, message="input rejected")
    document = create_document(http, semantic_admin, "notes", "a.md", "# Alpha\n\nFirst words.\n")
    chunk = current_chunks(document["id"]).get()
    assert chunk.state == ChunkState.FAILED and chunk.last_error.startswith("bad_request")
    assert chunk.available_at > timezone.now() + timedelta(seconds=pipeline.failed_retry_seconds() - 60)
    report = status(http, semantic_admin)
    assert report["chunks"]["failed"] == 1 and report["last_error"].startswith("bad_request")
    calls = len(embedder.calls)

    poll_embeddings_task.delay()  # cooling down: no provider call
    assert len(embedder.calls) == calls and current_chunks(document["id"]).get().state == ChunkState.FAILED
    EmbeddingChunk.objects.update(available_at=timezone.now() - timedelta(seconds=1))
    poll_embeddings_task.delay()

    chunk = current_chunks(document["id"]).get()
    assert chunk.state == ChunkState.EMBEDDED and chunk.last_error == "" and len(embedder.calls) == calls + 1
    assert status(http, semantic_admin)["chunks"]["failed"] == 0


@postgres_only
def test_retries_exhausted_by_a_long_outage_are_swept_again(http, semantic_admin, embedder, settings):
    settings.KNOWLEDGE_EMBEDDING_FAILED_RETRY_SECONDS = 0
    create_namespace(http, semantic_admin, "notes")
    embedder.fail_next(503, times=pipeline.MAX_ATTEMPTS)  # an outage that outlasts every attempt
    document = create_document(http, semantic_admin, "notes", "a.md", "# Alpha\n\nFirst words.\n")
    for _ in range(pipeline.MAX_ATTEMPTS - 1):  # each backoff cut short
        EmbeddingChunk.objects.update(available_at=timezone.now() - timedelta(seconds=1))
        embed_workspace_task.delay(semantic_admin.workspace.pk)
    chunk = current_chunks(document["id"]).get()
    assert chunk.state == ChunkState.FAILED and chunk.attempts == pipeline.MAX_ATTEMPTS
    assert status(http, semantic_admin)["chunks"]["failed"] == 1

    poll_embeddings_task.delay()  # the outage is over

    chunk = current_chunks(document["id"]).get()
    assert chunk.state == ChunkState.EMBEDDED and chunk.attempts == 1
