"""Semantic and hybrid search over HTTP on PostgreSQL + pgvector, indexed through the loopback provider."""

from __future__ import annotations

import pytest

from knowledge.models import ChunkState, EmbeddingChunk
from tests.conftest import create_document, create_namespace, grant
from tests.embedding_server import word_vector
from tests.knowledge.semantic_helpers import (
    KEY,
    enable,
    postgres_only,
    status,
)

pytestmark = [pytest.mark.django_db(transaction=True), postgres_only]

DOCS = {
    "ops/backups.md": "# Backups\n\nNightly database backups run at two. Restore a backup with the restore script.\n",
    "ops/deploys.md": "# Deploys\n\nBlue green deploys switch traffic after health checks pass.\n",
    "team/lunch.md": "# Lunch\n\nThe team lunch is on Fridays at the pizza place.\n",
}


def search(http, member, **params):
    response = http.as_(member).get("/kb/search", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def paths(body):
    return [hit["document"]["path"] for hit in body["data"]]


@pytest.fixture
def indexed(http, semantic_admin, embedder):
    create_namespace(http, semantic_admin, "ops-kb", others_can="read")
    ids = {path: create_document(http, semantic_admin, "ops-kb", path, body)["id"] for path, body in DOCS.items()}
    return ids


def test_writes_are_chunked_and_embedded_and_status_says_so(http, semantic_admin, indexed, embedder):
    report = status(http, semantic_admin)
    assert report["pgvector_ready"] and report["enabled"] and report["configured"]
    assert report["chunks"]["embedded"] == len(DOCS) and report["queue_depth"] == 0
    assert report["unavailable_reason"] is None and report["last_indexed_at"]
    assert sorted(embedder.inputs) == sorted(c.text for c in EmbeddingChunk.objects.all())
    assert all(text.startswith(("Backups", "Deploys", "Lunch")) for text in embedder.inputs)  # heading path prefix
    document = http.as_(semantic_admin).get(f"/kb/documents/{indexed['ops/backups.md']}?include_indexing=true").json()
    assert document["indexing"]["embedded"] == 1 and document["indexing"]["chunks"] == 1


def test_semantic_search_ranks_by_meaning_with_matching_chunks(http, semantic_admin, indexed, alice):
    body = search(http, alice, q="restore the nightly backup", mode="semantic")
    assert body["mode"] == "semantic" and body["effective_mode"] == "semantic" and body["fallback_reason"] is None
    assert paths(body)[0] == "ops/backups.md"
    hit = body["data"][0]
    assert hit["mode"] == "semantic" and hit["chunks"][0]["heading_path"] == ["Backups"]
    assert hit["score"] == hit["chunks"][0]["score"] > body["data"][-1]["score"]
    assert body["timings"]["embed_ms"] >= 0 and hit["document"]["reference_uri"].startswith("agor://kb/document/")


def test_min_similarity_drops_weak_matches(http, semantic_admin, indexed, alice):
    everything = search(http, alice, q="pizza lunch friday", mode="semantic")
    strict = search(http, alice, q="pizza lunch friday", mode="semantic", min_similarity=0.5)
    assert len(strict["data"]) < len(everything["data"]) and paths(strict) == ["team/lunch.md"]


def test_hybrid_fuses_text_and_semantic_ranks(http, semantic_admin, indexed, alice):
    body = search(http, alice, q="blue green deploys", mode="hybrid")
    assert body["effective_mode"] == "hybrid" and paths(body)[0] == "ops/deploys.md"
    top = body["data"][0]
    assert top["text_rank"] == 1 and top["semantic_rank"] == 1
    assert top["score"] == pytest.approx(2 / (60 + 1), rel=1e-3)
    # Snippets: the text leg's best chunk for its hits, the best semantic chunk for the others.
    assert "Blue green deploys" in top["snippet"]["text"] and top["snippet"]["start_line"] == 1
    semantic_only = [hit for hit in body["data"] if hit["text_rank"] is None]
    assert semantic_only and all(hit["snippet"]["text"] for hit in semantic_only)
    bare = search(http, alice, q="blue green deploys", mode="hybrid", content_mode="none")
    assert paths(bare) == paths(body) and all(hit["snippet"] is None for hit in bare["data"])
    wider = search(http, alice, q="blue green deploys", mode="hybrid", rrf_k=1)
    assert wider["data"][0]["score"] == pytest.approx(2 / (1 + 1), rel=1e-3)


def test_unreadable_documents_never_appear_and_pages_stay_full(http, semantic_admin, make_member, embedder):
    bob = make_member("member", username="bob")
    create_namespace(http, semantic_admin, "secret")
    create_namespace(http, semantic_admin, "open", others_can="read")
    for n in range(30):
        create_document(
            http, semantic_admin, "secret", f"s{n}.md", f"# Backup plan {n}\n\nbackup restore nightly {n}\n"
        )
    for n in range(5):
        create_document(http, semantic_admin, "open", f"o{n}.md", f"# Backup notes {n}\n\nbackup restore {n}\n")
    body = search(http, bob, q="backup restore nightly", mode="semantic", limit=5)
    assert sorted(paths(body)) == [f"o{n}.md" for n in range(5)]
    assert all(hit["namespace"]["slug"] == "open" for hit in body["data"])
    hybrid = search(http, bob, q="backup restore nightly", mode="hybrid", limit=10)
    assert {hit["namespace"]["slug"] for hit in hybrid["data"]} == {"open"}
    grant(http, semantic_admin, "secret", [("bob", "read")])
    assert len(search(http, bob, q="backup restore nightly", mode="semantic", limit=20)["data"]) == 20


def test_a_reader_of_few_namespaces_gets_the_exact_nearest_documents(http, semantic_admin, make_member, embedder):
    """One namespace of 25 readable: too narrow for the HNSW list, so the readable vectors are compared directly."""
    from knowledge import selectors
    from knowledge.embeddings import search as semantic_search
    from workspaces.access import actor_for

    carol = make_member("member", username="carol")
    for n in range(24):
        create_namespace(http, semantic_admin, f"team-{n}")
        create_document(http, semantic_admin, f"team-{n}", "plan.md", f"# Backup plan {n}\n\nbackup restore nightly\n")
    create_namespace(http, semantic_admin, "shared", others_can="read")
    for n in range(12):
        words = " ".join(["backup"] * (n + 1) + ["gardening"] * (12 - n))
        create_document(http, semantic_admin, "shared", f"s{n}.md", f"# Notes {n}\n\n{words}\n")
    actor = actor_for(carol.user, carol.workspace)
    share = selectors.readable_share(actor=actor, filters=selectors.DocumentFilters())
    assert semantic_search.approximate_candidates(40, share) > semantic_search.MAX_APPROXIMATE_CANDIDATES
    query = "backup restore nightly"
    body = search(http, carol, q=query, mode="semantic", limit=5)
    # The exact order: each readable document's best chunk by cosine, computed here from the
    # loopback provider's own vectors.
    wanted = word_vector(query, embedder.dimensions)
    best: dict[str, float] = {}
    for chunk in EmbeddingChunk.objects.filter(document__namespace__slug="shared").select_related("document"):
        cosine = sum(a * b for a, b in zip(wanted, word_vector(chunk.text, embedder.dimensions), strict=True))
        best[chunk.document.path] = max(best.get(chunk.document.path, -1.0), cosine)
    ranked = sorted(best, key=lambda path: -best[path])
    assert {hit["namespace"]["slug"] for hit in body["data"]} == {"shared"}
    assert [round(hit["score"], 4) for hit in body["data"]] == [round(best[path], 4) for path in ranked[:5]]
    assert set(paths(body)) <= {path for path in ranked if best[path] >= best[ranked[4]] - 1e-9}


def test_deep_pages_ask_hnsw_for_no_more_than_it_allows(http, semantic_admin, indexed, alice):
    # offset 400 + limit 100 wants 2,000 chunks: 10,000 candidates, past pgvector's ef_search cap.
    for mode in ("semantic", "hybrid"):
        body = search(http, alice, q="restore the nightly backup", mode=mode, limit=100, offset=400)
        assert body["data"] == [] and body["total"] == len(indexed)


def test_archived_documents_leave_semantic_results(http, semantic_admin, indexed, alice):
    archived = http.as_(semantic_admin).patch(f"/kb/documents/{indexed['team/lunch.md']}", json={"archived": True})
    assert archived.status_code == 200, archived.text
    assert "team/lunch.md" not in paths(search(http, alice, q="pizza lunch", mode="semantic"))
    assert "team/lunch.md" in paths(search(http, alice, q="pizza lunch", mode="semantic", archive_filter="all"))


def test_whitespace_only_edit_reuses_vectors_without_a_provider_call(http, semantic_admin, indexed, embedder):
    calls = len(embedder.calls)
    document_id = indexed["ops/backups.md"]
    revised = http.as_(semantic_admin).post(
        f"/kb/documents/{document_id}/revise", json={"content": DOCS["ops/backups.md"].replace(".\n", ".   \n\n\n\n")}
    )
    assert revised.status_code == 200, revised.text
    assert len(embedder.calls) == calls
    chunk = EmbeddingChunk.objects.get(document_id=document_id)
    assert chunk.state == ChunkState.EMBEDDED and str(chunk.version_id) == revised.json()["current_version"]["id"]
    http.as_(semantic_admin).post(f"/kb/documents/{document_id}/revise", json={"content": "# Backups\n\nNew words.\n"})
    assert len(embedder.calls) == calls + 1 and embedder.calls[-1].inputs == ["Backups\n\n# Backups\n\nNew words."]


def test_provider_outage_keeps_work_queued_and_hybrid_falls_back(http, semantic_admin, indexed, embedder, alice):
    embedder.fail_next(503, times=10)
    create_document(http, semantic_admin, "ops-kb", "ops/oncall.md", "# On call\n\nPager rotation.\n")
    chunk = EmbeddingChunk.objects.get(document__path="ops/oncall.md")
    assert chunk.state == ChunkState.PENDING and chunk.attempts == 1 and "provider_unavailable" in chunk.last_error
    assert chunk.available_at is not None
    report = status(http, semantic_admin)
    assert report["queue_depth"] == 1 and "provider_unavailable" in report["last_error"]
    hybrid = search(http, alice, q="pager rotation", mode="hybrid")
    assert hybrid["effective_mode"] == "text" and "provider" in hybrid["fallback_reason"]
    assert paths(hybrid) == ["ops/oncall.md"]
    semantic = http.as_(alice).get("/kb/search", params={"q": "pager", "mode": "semantic"})
    assert semantic.status_code == 400 and semantic.json()["code"] == "semantic_unavailable"


def test_settings_change_requeues_and_switching_back_reuses_vectors(http, semantic_admin, indexed, embedder):
    calls = len(embedder.calls)
    enable(http, semantic_admin, embedder, model="test-embed-2")  # a new space, same dimensions
    assert len(embedder.calls) == calls + 1 and embedder.calls[-1].model == "test-embed-2"
    report = status(http, semantic_admin)
    assert report["model"] == "test-embed-2" and report["chunks"]["embedded"] == len(DOCS)
    body = search(http, semantic_admin, q="restore the nightly backup", mode="semantic")
    assert paths(body)[0] == "ops/backups.md"
    enable(http, semantic_admin, embedder)  # back to the first space: its vectors are still there
    assert len(embedder.calls) == calls + 2  # only the query above and none for re-indexing
    assert status(http, semantic_admin)["chunks"]["embedded"] == len(DOCS)


def test_paused_indexing_waits_and_resumes(http, semantic_admin, indexed, embedder):
    enable(http, semantic_admin, embedder, indexing={"paused": True})
    create_document(http, semantic_admin, "ops-kb", "ops/paused.md", "# Paused\n\nNot yet.\n")
    assert EmbeddingChunk.objects.get(document__path="ops/paused.md").state == ChunkState.PENDING
    enable(http, semantic_admin, embedder, indexing={"paused": False})
    assert EmbeddingChunk.objects.get(document__path="ops/paused.md").state == ChunkState.EMBEDDED


def test_a_refused_key_fails_work_and_never_leaks(http, semantic_admin, indexed, embedder, caplog):
    wrong = "sk-wrong-" + "w" * 30
    enable(http, semantic_admin, embedder, api_key=wrong)
    create_document(http, semantic_admin, "ops-kb", "ops/new.md", "# New\n\nFresh text.\n")
    chunk = EmbeddingChunk.objects.get(document__path="ops/new.md")
    assert chunk.state == ChunkState.FAILED and "auth_failed" in chunk.last_error
    pages = [
        http.as_(semantic_admin).get("/kb/settings/semantic").text,
        http.as_(semantic_admin).get("/kb/settings/semantic/status").text,
        http.as_(semantic_admin).get("/kb/schema").text,
        http.as_(semantic_admin).get("/kb/search", params={"q": "fresh", "mode": "semantic"}).text,
        chunk.last_error,
        caplog.text,
    ]
    for page in pages:
        assert wrong not in page and KEY not in page
    enable(http, semantic_admin, embedder, api_key=KEY)  # a new key retries failed work
    assert EmbeddingChunk.objects.get(document__path="ops/new.md").state == ChunkState.EMBEDDED


def test_reindex_is_admin_only_and_rebuilds(http, semantic_admin, indexed, alice, embedder):
    assert http.as_(alice).post("/kb/settings/semantic/reindex").status_code == 403
    assert http.as_(alice).get("/kb/settings/semantic/status").status_code == 403
    calls = len(embedder.calls)
    response = http.as_(semantic_admin).post("/kb/settings/semantic/reindex")
    assert response.status_code == 202 and response.json()["queued"] is True
    assert len(embedder.calls) == calls  # same text: vectors were reused
    assert status(http, semantic_admin)["chunks"]["embedded"] == len(DOCS)


def test_vectors_carry_their_chunks_version_and_the_exact_path_reads_only_current_ones(
    http, semantic_admin, indexed, alice
):
    """Exact search reads vectors by document; a vector whose version is not its document's
    current one (a superseded version not yet re-chunked) is never compared. Migration 0011
    fills the columns of vectors written before they existed."""
    import importlib

    from django.db import connection

    from knowledge import selectors
    from knowledge.embeddings import pipeline, store
    from knowledge.embeddings import search as semantic_search

    revised = http.as_(semantic_admin).post(  # a whitespace-only edit: its vectors are copied by hash
        f"/kb/documents/{indexed['ops/backups.md']}/revise",
        json={"content": DOCS["ops/backups.md"].replace(".\n", ".  \n")},
    )
    assert revised.status_code == 200, revised.text

    def owners() -> set[tuple[str, str, str]]:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT v.chunk_id::text, v.document_id::text, v.version_id::text FROM {store.TABLE} v")
            return set(cursor.fetchall())

    chunks = {(str(c.id), str(c.document_id), str(c.version_id)) for c in EmbeddingChunk.objects.all()}
    assert owners() == chunks and len(chunks) >= len(DOCS)

    space = pipeline.active_space(semantic_admin.workspace.pk)
    scope_sql, scope_params = selectors.search_scope(
        selectors.document_list(actor=alice.actor, filters=selectors.DocumentFilters())
    )

    def exact_documents() -> set[str]:
        vector = word_vector("nightly backups restore", space.dimensions)
        rows = semantic_search._chunk_rows(space, vector, scope_sql, scope_params, 40, exact=True)
        return {str(row[2]) for row in rows}

    assert exact_documents() == set(indexed.values())
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {store.TABLE} SET version_id = gen_random_uuid() WHERE document_id = %s",
            [indexed["team/lunch.md"]],
        )
    assert exact_documents() == set(indexed.values()) - {indexed["team/lunch.md"]}

    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {store.TABLE} SET document_id = NULL, version_id = NULL")
    assert exact_documents() == set()
    migration = importlib.import_module("knowledge.migrations.0011_vector_owner")
    migration.add_vector_owner(None, type("SchemaEditor", (), {"connection": connection})())
    assert owners() == chunks
    assert exact_documents() == set(indexed.values())


def test_matched_chunks_show_the_start_of_their_text(http, semantic_admin, embedder, alice):
    """A long chunk's snippet is its first 399 characters and an ellipsis; a short one is whole."""
    from knowledge.embeddings.search import SNIPPET_CHARS

    create_namespace(http, semantic_admin, "notes", others_can="read")
    long_text = " ".join(f"glacier{n}" for n in range(120))
    create_document(http, semantic_admin, "notes", "long.md", f"# Glaciers\n\n{long_text}\n")
    create_document(http, semantic_admin, "notes", "short.md", "# Glaciers\n\nglacier melt\n")
    body = search(http, alice, q="glacier melt", mode="semantic", content_mode="none")
    chunks = {hit["document"]["path"]: hit["chunks"][0]["snippet"] for hit in body["data"]}
    stored = {chunk.document.path: chunk.text for chunk in EmbeddingChunk.objects.select_related("document")}
    assert len(stored["long.md"]) > SNIPPET_CHARS
    assert chunks["long.md"] == stored["long.md"][: SNIPPET_CHARS - 1].rstrip() + "…"
    assert chunks["short.md"] == stored["short.md"]
