"""Real Celery workers on Redis embed a workspace: racing workers, a worker killed mid-call, a
backlog handed over in bounded slices, a transient provider failure retried without the poll, a
content change during a worker's provider call, and a settings change re-queueing the workspace.

The workers run as separate processes against this test's PostgreSQL database and the loopback
provider; the test process only sends messages and reads the database.
"""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest
from django.db import connection

from knowledge.embeddings import store
from knowledge.models import ChunkState, Document, EmbeddingChunk
from tests.conftest import create_document, create_namespace, wait_for
from tests.knowledge.semantic_helpers import enable, postgres_only
from workspaces.models import SemanticPolicy

pytestmark = [pytest.mark.django_db(transaction=True), postgres_only]
LEASE_SECONDS = 3
DOCUMENTS = 24
BATCH = 4


@pytest.fixture
def worker_env():
    return {"KNOWLEDGE_EMBEDDING_LEASE_SECONDS": str(LEASE_SECONDS)}


@pytest.fixture
def pending(http, semantic_admin, embedder):
    """DOCUMENTS documents with one pending chunk each, then indexing unpaused without a wake-up."""
    enable(http, semantic_admin, embedder, indexing={"paused": True, "batch_size": BATCH})
    create_namespace(http, semantic_admin, "notes")
    for n in range(DOCUMENTS):
        create_document(http, semantic_admin, "notes", f"n{n}.md", f"# Note {n}\n\nWords of note number {n}.\n")
    row = SemanticPolicy.objects.get(workspace=semantic_admin.workspace)
    row.policy = {**row.policy, "indexing": {"paused": False, "batch_size": BATCH}}
    row.save(update_fields=["policy"])
    assert EmbeddingChunk.objects.filter(state=ChunkState.PENDING).count() == DOCUMENTS
    return semantic_admin.workspace.pk


def wait_until_embedded(timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if EmbeddingChunk.objects.filter(state=ChunkState.EMBEDDED).count() == DOCUMENTS:
            return
        time.sleep(0.2)
    states = list(EmbeddingChunk.objects.values_list("state", "last_error"))
    raise AssertionError(f"not all chunks were embedded in time: {states}")


def vector_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {store.TABLE}")
        return cursor.fetchone()[0]


def test_racing_workers_embed_each_chunk_once(workers, queue, pending, embedder):
    workers(), workers()
    for _ in range(6):  # duplicate wake-ups are harmless: claims decide who works
        queue("embed_workspace_task", pending)
    wait_until_embedded()
    texts = list(EmbeddingChunk.objects.values_list("text", flat=True))
    assert sorted(embedder.inputs) == sorted(texts)  # one provider call per claim, no chunk twice
    assert all(len(call.inputs) <= BATCH for call in embedder.calls)
    assert set(EmbeddingChunk.objects.values_list("generation", flat=True)) == {1}
    assert vector_count() == DOCUMENTS


def test_a_killed_worker_loses_nothing_and_its_late_work_is_redone(workers, queue, pending, embedder):
    arrived = embedder.block_next()
    doomed = workers()
    queue("embed_workspace_task", pending)
    assert arrived.wait(60), "the worker never called the provider"
    held = set(EmbeddingChunk.objects.filter(state=ChunkState.CLAIMED).values_list("id", flat=True))
    assert len(held) == BATCH
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(10)
    embedder.release()  # its answer goes nowhere
    workers()
    queue("embed_workspace_task", pending)  # the survivor takes what is not leased...
    wait_for(
        lambda: EmbeddingChunk.objects.filter(state=ChunkState.EMBEDDED).count() >= DOCUMENTS - BATCH,
        "the survivor to embed the unleased chunks",
        timeout=30,
    )
    time.sleep(LEASE_SECONDS + 0.5)
    queue("poll_embeddings_task")  # ...and beat's poll hands it the expired lease
    wait_until_embedded()
    regenerated = set(EmbeddingChunk.objects.filter(generation=2).values_list("id", flat=True))
    assert regenerated == held
    assert vector_count() == DOCUMENTS
    held_texts = sorted(EmbeddingChunk.objects.filter(id__in=held).values_list("text", flat=True))
    assert sorted(embedder.calls[0].inputs) == held_texts  # the killed call...
    assert sorted(t for t in embedder.inputs if t in held_texts) == sorted(held_texts * 2)  # ...redone once


def received(tmp_path: Path, task: str) -> int:
    """How many messages of `task` the workers took (from their logs)."""
    line = re.compile(rf"Task knowledge\.tasks\.{task}\[[0-9a-f-]+\] received")
    return sum(len(line.findall(log.read_text())) for log in tmp_path.glob("worker*.log"))


def test_a_big_backlog_is_handed_over_in_bounded_slices(workers, queue, pending, embedder, tmp_path):
    workers()
    queue("embed_workspace_task", pending, 2)  # two batches per message
    wait_until_embedded()
    assert all(len(call.inputs) <= BATCH for call in embedder.calls)
    assert received(tmp_path, "embed_workspace_task") == DOCUMENTS // (2 * BATCH)  # each slice a new message


def test_a_transient_provider_failure_during_chunk_sync_is_retried_without_the_poll(
    workers, queue, pending, embedder, tmp_path
):
    document = Document.objects.get(path="n0.md")
    EmbeddingChunk.objects.filter(document=document).delete()  # as if its chunk sync had been lost
    embedder.fail_next(500)
    workers()
    queue("sync_embedding_chunks_task", str(document.pk))  # no beat runs here: the retry is scheduled
    wait_until_embedded()
    assert embedder.calls[0].status == 500
    assert sorted(embedder.inputs) == sorted(EmbeddingChunk.objects.values_list("text", flat=True))
    chunk = EmbeddingChunk.objects.get(document=document)
    assert chunk.version_id == document.current_version_id and chunk.last_error == ""
    assert received(tmp_path, "embed_workspace_task") >= 2


def test_a_content_change_during_a_workers_provider_call_commits_nothing_stale(
    workers, queue, pending, embedder, http, semantic_admin
):
    arrived = embedder.block_next()
    workers()
    queue("embed_workspace_task", pending)
    assert arrived.wait(60), "the worker never called the provider"
    stale = EmbeddingChunk.objects.filter(state=ChunkState.CLAIMED).first()
    content = "# Changed\n\nRewritten while the worker waited.\n"
    revised = http.as_(semantic_admin).post(f"/kb/documents/{stale.document_id}/revise", json={"content": content})
    assert revised.status_code == 200
    embedder.release()  # the worker's answer for the old text arrives after the change
    wait_until_embedded()
    assert stale.text in embedder.calls[0].inputs  # the stale vector was computed...
    assert not EmbeddingChunk.objects.filter(id=stale.id).exists()
    with connection.cursor() as cursor:  # ...and never written
        cursor.execute(f"SELECT count(*) FROM {store.TABLE} WHERE chunk_id = %s", [stale.id])
        assert cursor.fetchone()[0] == 0
    current = EmbeddingChunk.objects.get(document_id=stale.document_id)
    assert str(current.version_id) == revised.json()["current_version"]["id"] and "Rewritten" in current.text
    assert vector_count() == DOCUMENTS


def test_a_settings_change_requeues_every_chunk_for_the_workers_once(
    workers, queue, pending, embedder, http, semantic_admin
):
    workers()
    queue("embed_workspace_task", pending)
    wait_until_embedded()
    texts = sorted(EmbeddingChunk.objects.values_list("text", flat=True))
    before = len(embedder.calls)
    enable(http, semantic_admin, embedder, model="test-embed-2", indexing={"paused": True, "batch_size": BATCH})
    assert EmbeddingChunk.objects.filter(state=ChunkState.PENDING).count() == DOCUMENTS  # all of them, no more
    row = SemanticPolicy.objects.get(workspace=semantic_admin.workspace)
    row.policy = {**row.policy, "indexing": {"paused": False, "batch_size": BATCH}}
    row.save(update_fields=["policy"])
    queue("embed_workspace_task", pending)
    wait_until_embedded()
    after = embedder.calls[before:]
    assert {call.model for call in after} == {"test-embed-2"}
    assert sorted(text for call in after for text in call.inputs) == texts  # each chunk once, in the new space
