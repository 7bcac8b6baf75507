"""Claims, leases and fencing of the embedding pipeline on real PostgreSQL (no provider involved)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from knowledge.embeddings import pipeline, store
from knowledge.models import ChunkState, EmbeddingChunk
from tests.conftest import create_document, create_namespace
from tests.knowledge.semantic_helpers import (
    DIMENSIONS,
    enable,
    postgres_only,
)

pytestmark = [pytest.mark.django_db(transaction=True), postgres_only]


@pytest.fixture
def queued(http, semantic_admin, embedder):
    """Ten documents with pending chunks; indexing is paused so only the test claims them."""
    enable(http, semantic_admin, embedder, indexing={"paused": True})
    create_namespace(http, semantic_admin, "notes")
    docs = [
        create_document(http, semantic_admin, "notes", f"n{n}.md", f"# Note {n}\n\nBody of note {n}.\n")
        for n in range(10)
    ]
    assert EmbeddingChunk.objects.filter(state=ChunkState.PENDING).count() == 10
    return semantic_admin, docs


def vector(seed: int = 1) -> list[float]:
    return [float(seed)] + [0.0] * (DIMENSIONS - 1)


def held(claim) -> dict[str, list[float]]:
    return {item.id: vector() for item in claim.items}


def vectors_for(ids) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT chunk_id::text FROM {store.TABLE} WHERE chunk_id = ANY(%s::uuid[])", [list(ids)])
        return {row[0] for row in cursor.fetchall()}


def workspace_and_space(admin):
    workspace_id = admin.workspace.pk
    return workspace_id, pipeline.active_space(workspace_id)


def test_concurrent_claims_never_overlap(queued):
    admin, _ = queued
    workspace_id, space = workspace_and_space(admin)
    barrier = threading.Barrier(2)
    claims: list = []

    def worker() -> None:
        try:
            barrier.wait()
            claims.append(pipeline.claim(workspace_id, space, limit=6))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first, second = ({i.id for i in c.items} if c else set() for c in claims)
    assert not first & second and len(first | second) == 10
    assert claims[0].token != claims[1].token


def test_a_claim_commits_once_and_a_repeat_commits_nothing(queued):
    admin, _ = queued
    workspace_id, space = workspace_and_space(admin)
    claim = pipeline.claim(workspace_id, space, limit=4)
    assert len(claim.items) == 4 and all(i.generation == 1 for i in claim.items)
    assert pipeline.complete(claim, held(claim)) == 4
    assert pipeline.complete(claim, held(claim)) == 0  # redelivered message: already embedded
    assert vectors_for(held(claim)) == set(held(claim))
    assert EmbeddingChunk.objects.filter(state=ChunkState.EMBEDDED).count() == 4


def test_an_expired_lease_is_reclaimed_and_the_stale_worker_commits_nothing(queued):
    admin, _ = queued
    workspace_id, space = workspace_and_space(admin)
    stale = pipeline.claim(workspace_id, space, limit=10)
    assert pipeline.claim(workspace_id, space, limit=10) is None  # leased
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {pipeline.TABLE} SET lease_until = now() - interval '1 second'")
    fresh = pipeline.claim(workspace_id, space, limit=10)
    assert {i.id for i in fresh.items} == {i.id for i in stale.items}
    assert all(i.generation == 2 for i in fresh.items)
    assert pipeline.complete(stale, held(stale)) == 0 and not vectors_for(held(stale))
    assert pipeline.complete(fresh, held(fresh)) == 10


def test_a_content_change_fences_work_in_flight(http, queued):
    admin, docs = queued
    workspace_id, space = workspace_and_space(admin)
    claim = pipeline.claim(workspace_id, space, limit=10)
    revised = http.as_(admin).post(f"/kb/documents/{docs[0]['id']}/revise", json={"content": "# Changed\n\nNew.\n"})
    assert revised.status_code == 200
    assert pipeline.complete(claim, held(claim)) == 9
    old_id = next(i.id for i in claim.items if not EmbeddingChunk.objects.filter(id=i.id).exists())
    assert old_id not in vectors_for([old_id])
    current = EmbeddingChunk.objects.get(document_id=docs[0]["id"])
    assert current.state == ChunkState.PENDING and str(current.version_id) == revised.json()["current_version"]["id"]


def test_archive_fences_work_in_flight_and_leaves_the_queue(http, queued):
    admin, docs = queued
    workspace_id, space = workspace_and_space(admin)
    claim = pipeline.claim(workspace_id, space, limit=10)
    assert http.as_(admin).patch(f"/kb/documents/{docs[1]['id']}", json={"archived": True}).status_code == 200
    assert pipeline.complete(claim, held(claim)) == 9
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {pipeline.TABLE} SET state = 'pending', claim_token = ''")
    assert pipeline.claim(workspace_id, space, limit=10).items.__len__() == 9  # archived is not claimable


def test_a_settings_change_fences_claims_of_the_old_space(http, embedder, queued):
    admin, _ = queued
    workspace_id, space = workspace_and_space(admin)
    claim = pipeline.claim(workspace_id, space, limit=10)
    enable(http, admin, embedder, model="test-embed-2", indexing={"paused": True})
    assert pipeline.complete(claim, held(claim)) == 0
    new_space = pipeline.active_space(workspace_id)
    assert new_space.pk != space.pk
    assert EmbeddingChunk.objects.filter(space=new_space, state=ChunkState.PENDING).count() == 10


def test_completion_validates_ids_and_dimensions_and_writes_nothing_on_error(queued):
    admin, _ = queued
    workspace_id, space = workspace_and_space(admin)
    claim = pipeline.claim(workspace_id, space, limit=2)
    with pytest.raises(ValueError):
        pipeline.complete(claim, {"00000000-0000-0000-0000-000000000000": vector()})
    with pytest.raises(ValueError):
        pipeline.complete(claim, {claim.items[0].id: [1.0, 2.0]})
    with pytest.raises(ValueError):
        pipeline.complete(claim, {claim.items[0].id: [float("nan")] * DIMENSIONS})
    assert not vectors_for(held(claim))
    assert EmbeddingChunk.objects.filter(state=ChunkState.CLAIMED).count() == 2


def seconds_until_available(chunk_id: str) -> float:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT extract(epoch FROM available_at - now()) FROM {pipeline.TABLE} WHERE id = %s", [chunk_id]
        )
        return float(cursor.fetchone()[0])


def test_retryable_failures_back_off_then_fail_after_the_attempt_limit(queued):
    admin, _ = queued
    workspace_id, space = workspace_and_space(admin)
    target = str(EmbeddingChunk.objects.order_by("id").values_list("id", flat=True).first())
    EmbeddingChunk.objects.exclude(id=target).update(state=ChunkState.FAILED)
    for attempt in range(1, pipeline.MAX_ATTEMPTS + 1):
        claim = pipeline.claim(workspace_id, space, limit=10)
        assert [i.id for i in claim.items] == [target] and claim.items[0].generation == attempt
        retry_after = 30.0 if attempt % 2 else None
        pipeline.release(claim, claim.items, error="rate_limited: slow down", retryable=True, retry_after=retry_after)
        chunk = EmbeddingChunk.objects.get(id=target)
        if attempt == pipeline.MAX_ATTEMPTS:
            break
        assert chunk.state == ChunkState.PENDING and pipeline.claim(workspace_id, space, limit=10) is None
        wait = seconds_until_available(target)
        if retry_after:
            assert 29 <= wait <= 30  # Retry-After is honoured
        else:
            assert 0 <= wait <= 2.0 * 2**attempt  # full jitter under the exponential cap
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {pipeline.TABLE} SET available_at = now() WHERE id = %s", [target])
    assert chunk.state == ChunkState.FAILED and chunk.last_error == "rate_limited: slow down"


def test_a_permanent_failure_fails_at_once(queued):
    admin, _ = queued
    workspace_id, space = workspace_and_space(admin)
    claim = pipeline.claim(workspace_id, space, limit=3)
    assert pipeline.release(claim, claim.items, error="auth_failed: no", retryable=False, retry_after=None) == 3
    assert EmbeddingChunk.objects.filter(state=ChunkState.FAILED).count() == 3
