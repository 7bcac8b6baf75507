"""Where vectors can live: SQLite builds chunks only; shared workers cap each workspace's batch and
the workspaces one scan looks at."""

from __future__ import annotations

import pytest
from django.db import connection

from knowledge.embeddings import pipeline
from knowledge.models import ChunkState, EmbeddingChunk
from tests.conftest import create_document, create_namespace
from tests.knowledge.semantic_helpers import enable, postgres_only, status
from workspaces.models import SemanticPolicy
from workspaces.services import workspace_ensure

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite deployment's behaviour")
def test_sqlite_keeps_the_policy_and_builds_chunks_but_never_calls_a_provider(http, semantic_admin, embedder):
    create_namespace(http, semantic_admin, "notes")
    document = create_document(http, semantic_admin, "notes", "a.md", "# Alpha\n\nSome words.\n\n## Beta\n\nMore.\n")
    chunks = list(EmbeddingChunk.objects.filter(document_id=document["id"]).order_by("ordinal"))
    assert chunks and chunks[0].heading_path == ["Alpha"] and "More." in chunks[-1].text
    assert all(c.space_id is None and c.state == ChunkState.PENDING for c in chunks)
    assert embedder.calls == []
    report = status(http, semantic_admin)
    assert report["database"] == "sqlite" and report["pgvector_ready"] is False
    assert "SQLite" in report["unavailable_reason"] and report["setup_hint"]
    semantic = http.as_(semantic_admin).get("/kb/search", params={"q": "words", "mode": "semantic"})
    assert semantic.status_code == 400 and semantic.json()["code"] == "semantic_unavailable"
    assert "SQLite" in semantic.json()["reason"]


@postgres_only
def test_shared_workers_cap_a_workspace_at_eight_chunks_per_provider_call(http, semantic_admin, embedder, settings):
    enable(http, semantic_admin, embedder, indexing={"paused": True, "batch_size": 32})
    create_namespace(http, semantic_admin, "notes")
    for n in range(20):
        create_document(http, semantic_admin, "notes", f"n{n}.md", f"# Note {n}\n\nText {n}.\n")
    row = SemanticPolicy.objects.get(workspace=semantic_admin.workspace)
    row.policy = {**row.policy, "indexing": {"paused": False, "batch_size": 32}}
    row.save(update_fields=["policy"])
    workspace_id = semantic_admin.workspace.pk

    settings.KNOWLEDGE_WORKSPACE_MODE = "required_from_auth"
    assert pipeline.workspaces_with_work() == [workspace_id]
    result = pipeline.embed_batch(workspace_id)
    assert result.claimed == 8 and result.embedded == 8 and len(embedder.calls[-1].inputs) == 8

    settings.KNOWLEDGE_WORKSPACE_MODE = "single"
    result = pipeline.embed_batch(workspace_id)
    assert result.claimed == 12 and len(embedder.calls[-1].inputs) == 12
    assert pipeline.workspaces_with_work() == []


@postgres_only
def test_archived_text_never_seeds_a_new_vector(http, semantic_admin, embedder):
    create_namespace(http, semantic_admin, "notes")
    body = "# Shared\n\nIdentical paragraph.\n"
    create_document(http, semantic_admin, "notes", "a.md", body)
    calls = len(embedder.calls)
    create_document(http, semantic_admin, "notes", "b.md", body)
    assert len(embedder.calls) == calls  # live twin: reused
    for path in ("a.md", "b.md"):
        document = EmbeddingChunk.objects.get(document__path=path).document_id
        assert http.as_(semantic_admin).patch(f"/kb/documents/{document}", json={"archived": True}).status_code == 200
    create_document(http, semantic_admin, "notes", "c.md", body)
    assert len(embedder.calls) == calls + 1  # archived twins are not a source
    assert EmbeddingChunk.objects.get(document__path="c.md").state == ChunkState.EMBEDDED


@postgres_only
def test_shared_workers_look_at_no_more_than_32_workspaces_per_scan(http, semantic_admin, embedder, settings):
    enable(http, semantic_admin, embedder, indexing={"paused": True})
    create_namespace(http, semantic_admin, "notes")
    for n in range(40):
        create_document(http, semantic_admin, "notes", f"n{n}.md", f"# Note {n}\n\nText {n}.\n")
    # Forty workspaces with work waiting: each pending chunk is routed to a workspace of its own.
    others = [workspace_ensure(slug=f"tenant-{n}", name=f"Tenant {n}").pk for n in range(40)]
    chunks = list(EmbeddingChunk.objects.order_by("id").values_list("id", flat=True))
    assert len(chunks) == 40
    for chunk_id, workspace_id in zip(chunks, others, strict=True):
        EmbeddingChunk.objects.filter(id=chunk_id).update(workspace_id=workspace_id)

    settings.KNOWLEDGE_WORKSPACE_MODE = "required_from_auth"
    scanned = pipeline.workspaces_with_work()
    assert len(scanned) == pipeline.MULTI_WORKSPACE_CANDIDATES == 32 and set(scanned) <= set(others)
    settings.KNOWLEDGE_WORKSPACE_MODE = "single"
    assert sorted(pipeline.workspaces_with_work()) == sorted(others)
