"""Archive and restore rules, one test each."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import create_document, create_namespace, grant

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def doc(http, alice, bob):
    create_namespace(http, alice, "arc")
    grant(http, alice, "arc", [("bob", "write")])
    return create_document(http, alice, "arc", "notes/a.md", "# A\n\nbody", edit_policy="public")


def test_archive_hides_from_lists_but_direct_link_and_history_work(http, alice, doc):
    client = http.as_(alice)
    response = client.patch(f"/kb/documents/{doc['id']}", json={"archived": True})
    assert response.status_code == 200
    assert response.json()["changed"] is True and response.json()["document"]["archived"] is True
    assert client.get("/kb/documents").json()["total"] == 0
    assert client.get("/kb/documents", params={"archive_filter": "archived"}).json()["total"] == 1
    assert client.get("/kb/documents", params={"archive_filter": "all"}).json()["total"] == 1
    assert client.get("/kb/documents", params={"include_archived": "true"}).json()["total"] == 1
    assert client.get("/kb/documents", params={"archived": "true"}).json()["total"] == 1
    direct = client.get(f"/kb/documents/{doc['id']}")
    assert direct.status_code == 200 and direct.json()["content"] == "# A\n\nbody"
    history = client.get(f"/kb/documents/{doc['id']}/versions")
    assert history.status_code == 200 and history.json()["total"] == 1
    assert client.get(f"/kb/documents/{doc['id']}/versions/1").json()["content"] == "# A\n\nbody"


def test_restore_preserves_everything_and_creates_no_version(http, alice, doc):
    client = http.as_(alice)
    client.patch(f"/kb/documents/{doc['id']}", json={"visibility": "private"})
    client.delete(f"/kb/documents/{doc['id']}")
    restored = client.patch(f"/kb/documents/{doc['id']}", json={"archived": False}).json()["document"]
    assert restored["id"] == doc["id"] and restored["archived"] is False
    assert restored["visibility"] == "private" and restored["created_by"] == "alice"
    assert restored["current_version"] == doc["current_version"]
    assert client.get(f"/kb/documents/{doc['id']}/versions").json()["total"] == 1


def test_guards_reject_stale_transitions(http, alice, doc):
    client = http.as_(alice)
    client.post(f"/kb/documents/{doc['id']}/revise", json={"content": "v2"})
    stale_version = client.patch(f"/kb/documents/{doc['id']}", json={"archived": True, "expected_version": 1})
    assert stale_version.status_code == 409 and stale_version.json()["code"] == "version_conflict"
    stale_state = client.patch(f"/kb/documents/{doc['id']}", json={"archived": True, "expected_archived": True})
    assert stale_state.status_code == 409 and stale_state.json()["code"] == "archive_state_conflict"
    assert client.get(f"/kb/documents/{doc['id']}").json()["archived"] is False
    ok = client.patch(
        f"/kb/documents/{doc['id']}", json={"archived": True, "expected_version": 2, "expected_archived": False}
    )
    assert ok.status_code == 200 and ok.json()["document"]["archived"] is True


def test_satisfied_retry_is_a_noop_that_changes_no_timestamp(http, alice, doc):
    client = http.as_(alice)
    first = client.patch(f"/kb/documents/{doc['id']}", json={"archived": True, "expected_archived": False}).json()
    retry = client.patch(f"/kb/documents/{doc['id']}", json={"archived": True, "expected_archived": False})
    assert retry.status_code == 200 and retry.json()["changed"] is False
    assert retry.json()["document"]["updated_at"] == first["document"]["updated_at"]
    assert retry.json()["document"]["archived_at"] == first["document"]["archived_at"]
    again = client.delete(f"/kb/documents/{doc['id']}")
    assert again.status_code == 200 and again.json()["changed"] is False


def test_public_editing_is_not_enough_to_archive(http, bob, doc):
    client = http.as_(bob)
    # bob may edit (public document, public edit policy) ...
    assert client.post(f"/kb/documents/{doc['id']}/revise", json={"content": "bob was here"}).status_code == 200
    # ... but archiving needs the owner or an admin.
    response = client.patch(f"/kb/documents/{doc['id']}", json={"archived": True})
    assert response.status_code == 403
    assert client.delete(f"/kb/documents/{doc['id']}").status_code == 403


def test_archived_path_stays_reserved(http, alice, doc):
    client = http.as_(alice)
    client.delete(f"/kb/documents/{doc['id']}")
    create = client.post("/kb/documents", json={"namespace": "arc", "path": "notes/a.md", "content": "new"})
    assert create.status_code == 409 and create.json()["code"] == "document_archived"
    upsert = client.put("/kb/documents/by-path", json={"namespace": "arc", "path": "notes/a.md", "content": "new"})
    assert upsert.status_code == 409 and upsert.json()["code"] == "document_archived"
    revise = client.post(f"/kb/documents/{doc['id']}/revise", json={"content": "edit"})
    assert revise.status_code == 409 and revise.json()["code"] == "document_archived"
    assert client.get(f"/kb/documents/{doc['id']}").json()["current_version"]["number"] == 1


def test_restore_onto_a_taken_path_is_409_and_says_to_rename(http, alice, doc):
    client = http.as_(alice)
    client.delete(f"/kb/documents/{doc['id']}")
    other = create_document(http, alice, "arc", "notes/b.md")
    moved = client.patch(f"/kb/documents/{other['id']}", json={"path": "notes/a.md"})
    assert moved.status_code == 200
    response = client.patch(f"/kb/documents/{doc['id']}", json={"archived": False})
    assert response.status_code == 409
    assert response.json()["code"] == "path_taken" and "Rename" in response.json()["detail"]
    assert response.json()["document_id"] == other["id"]
    client.patch(f"/kb/documents/{other['id']}", json={"path": "notes/c.md"})
    assert client.patch(f"/kb/documents/{doc['id']}", json={"archived": False}).status_code == 200


def test_bulk_reports_each_target_without_revealing_inaccessible_ones(http, alice, bob, doc):
    create_namespace(http, bob, "bobs")
    bobs_private = create_document(http, bob, "bobs", "secret.md")
    mine = create_document(http, alice, "arc", "notes/mine.md")
    targets = [
        {"document_id": doc["id"]},
        {"document_id": mine["id"], "expected_archived": False},
        {"document_id": bobs_private["id"]},
        {"document_id": str(uuid.uuid4())},
        {"document_id": "garbage"},
    ]
    response = http.as_(alice).post("/kb/documents/archive", json={"archived": True, "targets": targets})
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["archived", "archived", "error", "error", "error"]
    invisible, missing, garbage = results[2], results[3], results[4]
    assert invisible["code"] == missing["code"] == garbage["code"] == "not_found"
    assert invisible["detail"] == missing["detail"] == garbage["detail"]
    assert http.as_(bob).get(f"/kb/documents/{bobs_private['id']}").json()["archived"] is False
    retry = http.as_(alice).post("/kb/documents/archive", json={"archived": True, "targets": targets[:2]}).json()
    assert [r["status"] for r in retry["results"]] == ["unchanged", "unchanged"]
    # The guard on the second target is now stale (it is archived), so only that one is refused.
    restore = http.as_(alice).post("/kb/documents/archive", json={"archived": False, "targets": targets[:2]}).json()
    assert [r["status"] for r in restore["results"]] == ["restored", "error"]
    assert restore["results"][1]["code"] == "archive_state_conflict"


@pytest.mark.parametrize("count", [0, 51])
def test_bulk_accepts_one_to_fifty_targets(http, alice, doc, count):
    targets = [{"document_id": doc["id"]}] * count
    response = http.as_(alice).post("/kb/documents/archive", json={"archived": True, "targets": targets})
    assert response.status_code == 400 and response.json()["code"] == "invalid"
