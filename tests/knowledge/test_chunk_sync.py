"""Chunk sync in batches (reindex, a chunking change) writes what per-document sync writes."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from knowledge.embeddings import pipeline, store
from knowledge.models import ChunkState, EmbeddingChunk
from tests.conftest import create_document, create_namespace
from tests.knowledge.semantic_helpers import enable, postgres_only

pytestmark = pytest.mark.django_db(transaction=True)

BODY = "# Doc {n}\n\nOpening words {n}.\n\n## Part\n\nMore text {n}.\n\n## Part\n\nRepeated heading {n}.\n"


def _documents(http, member, count: int) -> list[str]:
    create_namespace(http, member, "notes")
    return [create_document(http, member, "notes", f"d{n}.md", BODY.format(n=n))["id"] for n in range(count)]


def _rows(document_ids: list[str]) -> list[tuple]:
    chunks = EmbeddingChunk.objects.filter(document_id__in=document_ids)
    return sorted(
        (
            str(c.document_id),
            str(c.version_id),
            c.workspace_id,
            c.space_id,
            c.ordinal,
            c.heading_path,
            c.anchor,
            c.start_line,
            c.end_line,
            c.text,
            c.content_hash,
            c.tokens,
            c.state,
        )
        for c in chunks
    )


def test_batched_sync_rewrites_exactly_what_per_document_sync_wrote(http, semantic_admin, monkeypatch):
    monkeypatch.setattr(pipeline, "SYNC_BATCH", 2)  # five documents: three transactions
    ids = _documents(http, semantic_admin, 5)
    written = _rows(ids)
    assert len(written) >= 10 and {row[0] for row in written} == set(ids)
    old_ids = set(EmbeddingChunk.objects.values_list("id", flat=True))

    assert pipeline.chunks_sync_many(ids) == 0  # every set is current: nothing rewritten
    assert set(EmbeddingChunk.objects.values_list("id", flat=True)) == old_ids

    missing = str(uuid.uuid4())
    assert pipeline.chunks_sync_many([*ids, missing], force=True) == len(written)
    assert _rows(ids) == written
    assert not old_ids & set(EmbeddingChunk.objects.values_list("id", flat=True))  # replaced, not kept

    # A document whose chunks are gone (a lost sync) is chunked again; the others are left alone.
    EmbeddingChunk.objects.filter(document_id=ids[3]).delete()
    kept = set(EmbeddingChunk.objects.values_list("id", flat=True))
    assert pipeline.chunks_sync_many(ids) == sum(1 for row in written if row[0] == ids[3])
    assert kept <= set(EmbeddingChunk.objects.values_list("id", flat=True))
    # Its vectors went with its rows, so where vectors live it waits for the provider again.
    assert [row[:-1] for row in _rows(ids)] == [row[:-1] for row in written]


@postgres_only
def test_batched_resync_keeps_every_vector_without_a_provider_call(http, semantic_admin, embedder, monkeypatch):
    enable(http, semantic_admin, embedder)
    monkeypatch.setattr(pipeline, "SYNC_BATCH", 2)
    ids = _documents(http, semantic_admin, 5)
    chunks = EmbeddingChunk.objects.filter(document_id__in=ids)
    assert chunks.count() >= 10 and set(chunks.values_list("state", flat=True)) == {ChunkState.EMBEDDED}
    calls = len(embedder.calls)

    written = pipeline.chunks_sync_many(ids, force=True)
    assert written == chunks.count()
    assert set(chunks.values_list("state", flat=True)) == {ChunkState.EMBEDDED}
    assert len(embedder.calls) == calls
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {store.TABLE} WHERE chunk_id = ANY(%s::uuid[])",
            [[str(chunk_id) for chunk_id in chunks.values_list("id", flat=True)]],
        )
        assert cursor.fetchone()[0] == written
