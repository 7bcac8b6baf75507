"""Documents over HTTP: create, read, list, upsert, revise, patch, versions, limits."""

from __future__ import annotations

import pytest

from tests.conftest import create_document, create_namespace

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ns(http, alice):
    create_namespace(http, alice, "eng")
    return "eng"


def test_create_returns_document_with_version_one(http, alice, ns):
    doc = create_document(http, alice, ns, "/guides//setup.md", "# Setup guide\n\nSteps.")
    assert doc["path"] == "guides/setup.md"
    assert doc["title"] == "Setup guide"
    assert doc["reference_uri"] == f"agor://kb/document/{doc['id']}"
    assert doc["uri"] == "agor://kb/eng/guides/setup.md"
    assert doc["url"].endswith("/ui/kb/eng/guides/setup.md")
    assert doc["current_version"]["number"] == 1
    assert doc["current_version"]["byte_length"] == len(b"# Setup guide\n\nSteps.")
    assert doc["content"] == "# Setup guide\n\nSteps."
    assert doc["visibility"] == "public" and doc["kind"] == "doc" and doc["status"] == "published"


def test_title_falls_back_to_path_leaf(http, alice, ns):
    doc = create_document(http, alice, ns, "notes/release_plan-2026.md", "plain text, no heading")
    assert doc["title"] == "release plan 2026"


def test_explicit_title_and_icon(http, alice, ns):
    doc = create_document(http, alice, ns, "a.md", "body", title="  Custom  ", icon=" 🚀 ")
    assert doc["title"] == "Custom" and doc["icon"] == "🚀"
    response = http.as_(alice).post(
        "/kb/documents", json={"namespace": ns, "path": "b.md", "content": "x", "icon": "x" * 33}
    )
    assert response.status_code == 400 and response.json()["code"] == "invalid_icon"


@pytest.mark.parametrize("path", ["../etc/passwd", "a/./b", "con.md", "a/b.", "what?.md", "", "a\x01b"])
def test_unsafe_paths_are_rejected(http, alice, ns, path):
    response = http.as_(alice).post("/kb/documents", json={"namespace": ns, "path": path, "content": "x"})
    assert response.status_code == 400
    assert response.json()["code"] in ("invalid_path", "invalid")


def test_frontmatter_and_hashes_are_recorded(http, alice, ns):
    content = "---\ntags: [a, b]\nowner: team\n---\n# Title\n"
    doc = create_document(http, alice, ns, "fm.md", content)
    version = http.as_(alice).get(f"/kb/documents/{doc['id']}/versions/1").json()
    assert version["frontmatter"] == {"tags": ["a", "b"], "owner": "team"}
    import hashlib

    assert version["sha256"] == hashlib.sha256(content.encode()).hexdigest()
    assert version["md5"] == hashlib.md5(content.encode()).hexdigest()
    assert version["content"] == content


def test_path_taken_is_409(http, alice, ns):
    create_document(http, alice, ns, "dup.md")
    response = http.as_(alice).post("/kb/documents", json={"namespace": ns, "path": "dup.md", "content": "x"})
    assert response.status_code == 409 and response.json()["code"] == "path_taken"


def test_list_paginates_with_total_and_filters(http, alice, ns):
    for i in range(7):
        create_document(http, alice, ns, f"folder/doc{i}.md", f"# D{i}", kind="guide" if i % 2 else "doc")
    create_document(http, alice, ns, "other/x.md")
    client = http.as_(alice)
    first = client.get("/kb/documents", params={"namespace": ns, "limit": 3}).json()
    assert first["total"] == 8 and first["limit"] == 3 and len(first["data"]) == 3
    assert "content" not in first["data"][0]
    rest = client.get("/kb/documents", params={"namespace": ns, "limit": 3, "offset": 6}).json()
    assert len(rest["data"]) == 2
    seen = {d["id"] for d in first["data"]} | {d["id"] for d in rest["data"]}
    assert len(seen) == 5
    beyond = client.get("/kb/documents", params={"namespace": ns, "offset": 100}).json()
    assert beyond["total"] == 8 and beyond["data"] == []
    prefix = client.get("/kb/documents", params={"path_prefix": "folder/"}).json()
    assert prefix["total"] == 7
    guides = client.get("/kb/documents", params={"kind": "guide"}).json()
    assert guides["total"] == 3
    by_path = client.get("/kb/documents", params={"order": "path", "namespace": ns}).json()["data"]
    assert [d["path"] for d in by_path] == sorted(d["path"] for d in by_path)
    with_content = client.get("/kb/documents", params={"limit": 1, "include_content": "true"}).json()
    assert "content" in with_content["data"][0]


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 201},
        {"offset": -1},
        {"include_my_drafts": "maybe"},
        {"order": "random"},
        {"archive_filter": "deleted"},
        {"kind": "novel"},
    ],
)
def test_bad_list_parameters_are_400(http, alice, ns, params):
    response = http.as_(alice).get("/kb/documents", params=params)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"


def test_other_users_drafts_hidden_unless_asked(http, alice, bob, ns):
    from tests.conftest import grant

    grant(http, alice, ns, [("bob", "write")])
    create_document(http, alice, ns, "alice-draft.md", status="draft")
    bob_draft = create_document(http, bob, ns, "bob-draft.md", status="draft")
    create_document(http, alice, ns, "published.md")
    as_bob = http.as_(bob)
    paths = {d["path"] for d in as_bob.get("/kb/documents").json()["data"]}
    assert paths == {"bob-draft.md", "published.md"}
    paths = {
        d["path"] for d in as_bob.get("/kb/documents", params={"include_other_user_drafts": "true"}).json()["data"]
    }
    assert "alice-draft.md" in paths
    paths = {d["path"] for d in as_bob.get("/kb/documents", params={"include_my_drafts": "false"}).json()["data"]}
    assert "bob-draft.md" not in paths
    # Drafts are not secret: a direct get follows normal visibility.
    assert http.as_(alice).get(f"/kb/documents/{bob_draft['id']}").status_code == 200


def test_revise_creates_exactly_one_version_and_checks_expected_version(http, alice, ns):
    doc = create_document(http, alice, ns, "r.md", "v1")
    client = http.as_(alice)
    ok = client.post(f"/kb/documents/{doc['id']}/revise", json={"content": "v2", "expected_version": 1})
    assert ok.status_code == 200, ok.text
    assert ok.json()["current_version"]["number"] == 2
    stale = client.post(f"/kb/documents/{doc['id']}/revise", json={"content": "v3", "expected_version": 1})
    assert stale.status_code == 409
    body = stale.json()
    assert body["code"] == "version_conflict" and body["current_version"]["number"] == 2
    by_id = client.post(
        f"/kb/documents/{doc['id']}/revise",
        json={"content": "v3", "expected_version": ok.json()["current_version"]["id"]},
    )
    assert by_id.status_code == 200
    history = client.get(f"/kb/documents/{doc['id']}/versions").json()
    assert history["total"] == 3
    assert [v["number"] for v in history["data"]] == [3, 2, 1]
    assert "content" not in history["data"][0]
    assert client.get(f"/kb/documents/{doc['id']}/versions/2").json()["content"] == "v2"
    assert client.get(f"/kb/documents/{doc['id']}/versions/9").status_code == 404


def test_title_from_content_follows_revisions(http, alice, ns):
    doc = create_document(http, alice, ns, "t.md", "# First\n")
    revised = http.as_(alice).post(f"/kb/documents/{doc['id']}/revise", json={"content": "# Second\n"}).json()
    assert revised["title"] == "Second"


def test_upsert_by_path_creates_then_updates_and_is_idempotent(http, alice, ns):
    client = http.as_(alice)
    body = {"namespace": ns, "path": "up/sert.md", "content": "# One\n"}
    created = client.put("/kb/documents/by-path", json=body)
    assert created.status_code == 201 and created.json()["created"] is True
    doc_id = created.json()["document"]["id"]
    again = client.put("/kb/documents/by-path", json=body)
    assert again.status_code == 200 and again.json()["changed"] is False
    assert again.json()["document"]["current_version"]["number"] == 1
    changed = client.put("/kb/documents/by-path", json={**body, "content": "# Two\n", "expected_version": 1})
    assert changed.json()["changed"] is True and changed.json()["document"]["current_version"]["number"] == 2
    assert changed.json()["document"]["id"] == doc_id
    stale = client.put("/kb/documents/by-path", json={**body, "content": "# Three\n", "expected_version": 1})
    assert stale.status_code == 409 and stale.json()["code"] == "version_conflict"
    fetched = client.get("/kb/documents/by-path", params={"namespace": ns, "path": "/up/sert.md"})
    assert fetched.status_code == 200 and fetched.json()["content"] == "# Two\n"
    missing = client.get("/kb/documents/by-path", params={"namespace": ns, "path": "nope.md"})
    assert missing.status_code == 404
    metadata_only = client.put("/kb/documents/by-path", json={"namespace": ns, "path": "up/sert.md", "kind": "guide"})
    assert metadata_only.json()["document"]["kind"] == "guide"
    assert metadata_only.json()["document"]["current_version"]["number"] == 2


def test_upsert_new_document_needs_content(http, alice, ns):
    response = http.as_(alice).put("/kb/documents/by-path", json={"namespace": ns, "path": "new.md"})
    assert response.status_code == 400


def test_patch_is_metadata_only_and_moves_paths(http, alice, ns):
    doc = create_document(http, alice, ns, "old/name.md", "# Keep me\n")
    create_document(http, alice, ns, "taken.md")
    client = http.as_(alice)
    moved = client.patch(f"/kb/documents/{doc['id']}", json={"path": "new/name.md", "title": "Renamed"})
    assert moved.status_code == 200, moved.text
    data = moved.json()["document"]
    assert data["path"] == "new/name.md" and data["title"] == "Renamed"
    assert data["current_version"]["number"] == 1
    assert client.get(f"/kb/documents/{doc['id']}").json()["content"] == "# Keep me\n"
    clash = client.patch(f"/kb/documents/{doc['id']}", json={"path": "taken.md"})
    assert clash.status_code == 409 and clash.json()["code"] == "path_taken"
    ignored = client.patch(f"/kb/documents/{doc['id']}", json={"content": "sneaky"})
    assert ignored.status_code == 200
    assert client.get(f"/kb/documents/{doc['id']}").json()["content"] == "# Keep me\n"


def test_ten_mebibyte_document_is_accepted_and_larger_is_413(http, alice, ns):
    client = http.as_(alice)
    line = "0123456789abcdef" * 4 + "\n"
    big = line * (10 * 1024 * 1024 // len(line))
    ok = client.post("/kb/documents", json={"namespace": ns, "path": "big.md", "content": big})
    assert ok.status_code == 201, ok.text[:200]
    assert ok.json()["current_version"]["byte_length"] == len(big.encode())
    too_big = client.post("/kb/documents", json={"namespace": ns, "path": "bigger.md", "content": big + "x" * 65536})
    assert too_big.status_code == 413 and too_big.json()["code"] == "content_too_large"
    huge_body = client.post(
        "/kb/documents",
        content=b'{"namespace": "eng", "path": "h.md", "content": "' + b"x" * (33 * 1024 * 1024) + b'"}',
        headers={"Content-Type": "application/json"},
    )
    assert huge_body.status_code == 413 and huge_body.json()["code"] == "request_too_large"
    assert client.get("/kb/documents", params={"path": "bigger.md"}).json()["total"] == 0


@pytest.mark.parametrize(
    "body",
    [
        {"namespace": "eng", "path": "x.md"},
        {"namespace": "eng", "path": "x.md", "content": 5},
        {"namespace": "eng", "path": "x.md", "content": "x", "kind": "novel"},
        {"namespace": "eng", "path": "x.md", "content": "x", "metadata": [1, 2]},
        {"namespace": "eng", "path": "x.md", "content": "bad \ud800 surrogate"},
        {"namespace": "eng", "path": "x.md", "content": "nul \x00 byte"},
    ],
)
def test_bad_document_input_is_400_and_writes_nothing(http, alice, ns, body):
    import json as jsonlib

    response = http.as_(alice).post(
        "/kb/documents", content=jsonlib.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "invalid"
    assert http.as_(alice).get("/kb/documents").json()["total"] == 0


def test_malformed_json_is_400(http, alice, ns):
    response = http.as_(alice).post("/kb/documents", content=b"{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and response.json()["code"] == "parse_error"


def test_unknown_document_id_forms_are_404(http, alice, ns):
    for ident in ("not-a-uuid", "00000000-0000-0000-0000-000000000000"):
        response = http.as_(alice).get(f"/kb/documents/{ident}")
        assert (response.status_code == 404 and response.json() == {"detail": "Not found.", "code": "not_found"}) or (
            response.json()["code"] == "not_found"
        )


def test_create_and_revise_answer_with_the_document_as_a_read_shows_it(http, alice, bob):
    """Writes render the saved instance without reading it back: the answer must still be what
    a GET returns, down to timestamps, metadata and the author names."""
    create_namespace(http, alice, "shared", others_can="write")
    created = http.as_(alice).post(
        "/kb/documents",
        json={
            "namespace": "shared",
            "path": "notes/same.md",
            "content": "# Same\n\nBody.",
            "icon": "📘",
            "metadata": {"team": "core", "tags": ["a", "b"]},
            "edit_policy": "public",
        },
    )
    assert created.status_code == 201, created.text
    document = created.json()
    assert document == http.as_(alice).get(f"/kb/documents/{document['id']}").json()
    revised = http.as_(bob).post(
        f"/kb/documents/{document['id']}/revise",
        json={"content": "# Renamed\n\nNew body.", "expected_version": 1, "first_line_is_title": True},
    )
    assert revised.status_code == 200, revised.text
    answer = revised.json()
    read = http.as_(bob).get(f"/kb/documents/{document['id']}", params={"include_content": "false"}).json()
    assert answer == read
    assert answer["updated_by"] == "bob" and answer["created_by"] == "alice" and answer["title"] == "Renamed"
