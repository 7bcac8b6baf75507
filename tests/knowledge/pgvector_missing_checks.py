"""Checks for a database whose role cannot create pgvector; run by test_vector_store_setup.py.

Not collected on its own (the name does not start with `test_`): the outer test starts pytest on
this file in a subprocess with DATABASE_URL set to a role without superuser rights, so the test
database and its migrations belong to that role. Running it any other way fails at once.
"""

from __future__ import annotations

import os

import psycopg
import pytest
from django.db import connection

from knowledge.embeddings import store
from knowledge.models import ChunkState, EmbeddingChunk
from tests.conftest import create_document, create_namespace
from tests.knowledge.semantic_helpers import enable, status

pytestmark = pytest.mark.django_db(transaction=True)

BACKUPS = "# Backups\n\nThe nightly backup is copied to cold storage; restore it with the restore script.\n"
LUNCH = "# Lunch\n\nThe canteen serves soup on Fridays.\n"


@pytest.fixture(autouse=True)
def _role_without_pgvector(db):
    if os.environ.get("KB_WITHOUT_PGVECTOR") != "1":
        pytest.fail("run through tests/knowledge/test_vector_store_setup.py, which prepares the database")
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        assert cursor.fetchone()[0] is False
        cursor.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'")
        assert cursor.fetchone()[0] == 0, "the test database has pgvector: nothing would be tested"


def search(http, member, **params):
    return http.as_(member).get("/kb/search", params=params)


def paths(body):
    return [hit["document"]["path"] for hit in body["data"]]


def test_text_search_works_semantic_explains_and_the_setup_hint_fixes_it(http, make_member, embedder):
    admin = make_member("admin", username="ada")
    create_namespace(http, admin, "ops")
    backups = create_document(http, admin, "ops", "backups.md", BACKUPS)
    create_document(http, admin, "ops", "lunch.md", LUNCH)
    policy = enable(http, admin, embedder)
    assert "pgvector" in policy["unavailable_reason"]

    # Writes and text search work; chunks exist (so text units and a later index can build on them).
    revised = http.as_(admin).post(
        f"/kb/documents/{backups['id']}/revise",
        json={"content": BACKUPS + "\nOffsite copies rotate weekly.\n", "expected_version": 1},
    )
    assert revised.status_code == 200, revised.text
    text = search(http, admin, q="offsite copies", mode="text")
    assert text.status_code == 200 and paths(text.json()) == ["backups.md"], text.text
    chunks = EmbeddingChunk.objects.all()
    assert chunks.count() == 2 and all(c.space_id is None and c.state == ChunkState.PENDING for c in chunks)

    # Semantic: 400 with the reason and the fix.
    semantic = search(http, admin, q="restore the nightly backup", mode="semantic")
    assert semantic.status_code == 400, semantic.text
    error = semantic.json()
    assert error["code"] == "semantic_unavailable"
    assert "pgvector extension is available on this PostgreSQL server but not installed" in error["reason"]
    assert "CREATE EXTENSION vector" in error["reason"] and "superuser" in error["reason"]
    assert "/kb/settings/semantic/reindex" in error["reason"]

    # Hybrid: falls back to text and says why.
    hybrid = search(http, admin, q="restore the nightly backup", mode="hybrid")
    assert hybrid.status_code == 200, hybrid.text
    body = hybrid.json()
    assert body["mode"] == "hybrid" and body["effective_mode"] == "text"
    assert "pgvector" in body["fallback_reason"] and "CREATE EXTENSION vector" in body["fallback_reason"]
    assert paths(body)[0] == "backups.md" and all(hit["mode"] == "text" for hit in body["data"])

    # Status: not ready, with the reason and the setup hint.
    report = status(http, admin)
    assert report["database"] == "postgresql" and report["enabled"] and report["configured"]
    assert report["pgvector_available"] is True
    assert report["pgvector_installed"] is False and report["pgvector_ready"] is False
    assert report["pgvector_version"] and "not installed in this database" in report["reason"]
    assert "CREATE EXTENSION vector" in report["setup_hint"] and "superuser" in report["setup_hint"]
    assert "pgvector" in report["unavailable_reason"] and report["space_id"] is None
    assert report["chunks"]["pending"] == 2

    # A reindex by the unprivileged role cannot create the extension: still a reported state.
    reindex = http.as_(admin).post("/kb/settings/semantic/reindex")
    assert reindex.status_code == 202, reindex.text
    assert reindex.json()["status"]["pgvector_ready"] is False
    assert embedder.calls == []  # no provider call while vectors cannot be stored

    # The operator follows the hint: a superuser creates the extension, an admin reindexes.
    with psycopg.connect(os.environ["KB_PG_SUPERUSER"], dbname=connection.settings_dict["NAME"]) as superuser:
        superuser.execute("CREATE EXTENSION vector")
    reindex = http.as_(admin).post("/kb/settings/semantic/reindex")
    assert reindex.status_code == 202, reindex.text
    report = status(http, admin)
    assert report["pgvector_ready"] is True and report["reason"] is None and report["setup_hint"] is None
    assert report["chunks"]["embedded"] == 2 and report["queue_depth"] == 0
    assert store.status().ready
    semantic = search(http, admin, q="restore the nightly backup", mode="semantic")
    assert semantic.status_code == 200, semantic.text
    assert paths(semantic.json())[0] == "backups.md"
    hybrid = search(http, admin, q="restore the nightly backup", mode="hybrid").json()
    assert hybrid["effective_mode"] == "hybrid" and hybrid["fallback_reason"] is None
