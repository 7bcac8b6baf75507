"""Namespaces over HTTP: creation defaults, listing with permissions, management, ACL, archive."""

from __future__ import annotations

import pytest

from tests.conftest import create_document, create_namespace, grant

pytestmark = pytest.mark.django_db(transaction=True)


def test_any_member_creates_and_owns_with_private_default(http, alice):
    body = create_namespace(http, alice, "team.notes-1", display_name="Team notes")
    assert body["owner"] == "alice"
    assert body["others_can"] == "none"
    assert body["effective_permission"] == "own"
    acl = http.as_(alice).get("/kb/namespaces/team.notes-1/acl").json()
    assert acl["entries"] == [{"subject_type": "user", "subject": "alice", "permission": "own"}]


@pytest.mark.parametrize("slug", ["Upper", "-lead", "", "a" * 101, "sp ace", "ü"])
def test_invalid_slugs_are_400(http, alice, slug):
    response = http.as_(alice).post("/kb/namespaces", json={"slug": slug})
    assert response.status_code == 400 and response.json()["code"] == "invalid"
    assert "slug" in response.json()["errors"]


def test_duplicate_slug_is_409(http, alice, bob):
    create_namespace(http, alice, "dup")
    response = http.as_(bob).post("/kb/namespaces", json={"slug": "dup"})
    assert response.status_code == 409 and response.json()["code"] == "slug_taken"


def test_listing_shows_only_accessible_namespaces_with_effective_permission(http, alice, bob, make_member):
    admin = make_member("admin", username="ada")
    create_namespace(http, alice, "private-a")
    create_namespace(http, alice, "readable", others_can="read")
    create_namespace(http, alice, "granted")
    grant(http, alice, "granted", [("bob", "write")])
    rows = http.as_(bob).get("/kb/namespaces").json()
    assert {r["slug"]: r["effective_permission"] for r in rows["data"]} == {"readable": "read", "granted": "write"}
    assert rows["total"] == 2
    admin_rows = http.as_(admin).get("/kb/namespaces").json()
    assert {r["slug"]: r["effective_permission"] for r in admin_rows["data"]} == {
        "private-a": "own",
        "readable": "own",
        "granted": "own",
    }
    paged = http.as_(admin).get("/kb/namespaces", params={"limit": 1, "offset": 1}).json()
    assert paged["total"] == 3 and [r["slug"] for r in paged["data"]] == ["private-a"]


def test_group_grants_count(http, alice, bob, workspace):
    from workspaces.models import Group

    create_namespace(http, alice, "grp")
    group = Group.objects.create(workspace=workspace, name="editors")
    group.members.add(bob.user)
    response = http.as_(alice).put(
        "/kb/namespaces/grp/acl",
        json={
            "entries": [
                {"subject_type": "user", "subject": "alice", "permission": "own"},
                {"subject_type": "group", "subject": "editors", "permission": "write"},
            ]
        },
    )
    assert response.status_code == 200
    assert http.as_(bob).get("/kb/namespaces/grp").json()["effective_permission"] == "write"
    group.archived = True
    group.save()
    assert http.as_(bob).get("/kb/namespaces/grp").status_code == 404


def test_management_needs_own_and_slug_is_immutable(http, alice, bob):
    create_namespace(http, alice, "managed")
    grant(http, alice, "managed", [("bob", "write")])
    denied = http.as_(bob).patch("/kb/namespaces/managed", json={"description": "mine now"})
    assert denied.status_code == 403 and denied.json()["code"] == "permission_denied"
    denied_acl = http.as_(bob).put("/kb/namespaces/managed/acl", json={"entries": []})
    assert denied_acl.status_code == 403
    ok = http.as_(alice).patch("/kb/namespaces/managed", json={"description": "Docs", "others_can": "read"})
    assert ok.status_code == 200 and ok.json()["description"] == "Docs" and ok.json()["others_can"] == "read"
    slug = http.as_(alice).patch("/kb/namespaces/managed", json={"slug": "renamed"})
    assert slug.status_code == 400 and slug.json()["code"] == "slug_immutable"


def test_cannot_remove_own_last_owner_path(http, alice, bob):
    create_namespace(http, alice, "keep")
    # alice owns through the owner field and the `own` grant; dropping the grant alone is fine.
    ok = http.as_(alice).put("/kb/namespaces/keep/acl", json={"entries": []})
    assert ok.status_code == 200
    # Handing ownership away with no other `own` path is refused, and nothing changes.
    refused = http.as_(alice).patch("/kb/namespaces/keep", json={"owner": "bob"})
    assert refused.status_code == 403 and refused.json()["code"] == "last_owner_access"
    assert http.as_(alice).get("/kb/namespaces/keep").json()["owner"] == "alice"
    # With an own grant first, the move succeeds.
    grant(http, alice, "keep", [])
    moved = http.as_(alice).patch("/kb/namespaces/keep", json={"owner": "bob"})
    assert moved.status_code == 200 and moved.json()["owner"] == "bob"
    refused_acl = http.as_(alice).put("/kb/namespaces/keep/acl", json={"entries": []})
    assert refused_acl.status_code == 403 and refused_acl.json()["code"] == "last_owner_access"
    assert http.as_(alice).get("/kb/namespaces/keep/acl").json()["entries"][0]["subject"] == "alice"


def test_acl_rejects_unknown_subjects(http, alice, make_member, other_workspace):
    outsider = make_member("member", workspace_=other_workspace, username="mallory")
    create_namespace(http, alice, "acl")
    response = http.as_(alice).put(
        "/kb/namespaces/acl/acl",
        json={"entries": [{"subject_type": "user", "subject": outsider.user.username, "permission": "read"}]},
    )
    assert response.status_code == 400 and response.json()["code"] == "unknown_subject"


def test_archiving_a_namespace_archives_its_documents_and_restore_brings_them_back(http, alice, bob):
    create_namespace(http, alice, "old", others_can="read")
    doc = create_document(http, alice, "old", "a.md")
    create_document(http, alice, "old", "b.md")
    archived_alone = create_document(http, alice, "old", "c.md")
    http.as_(alice).delete(f"/kb/documents/{archived_alone['id']}")
    response = http.as_(alice).delete("/kb/namespaces/old")
    assert response.status_code == 200 and response.json()["archived"] is True
    assert http.as_(bob).get("/kb/namespaces/old").status_code == 404
    assert http.as_(bob).get(f"/kb/documents/{doc['id']}").status_code == 404
    assert "old" not in {r["slug"] for r in http.as_(alice).get("/kb/namespaces").json()["data"]}
    archived = http.as_(alice).get("/kb/namespaces", params={"archive_filter": "archived"}).json()
    assert [r["slug"] for r in archived["data"]] == ["old"]
    assert http.as_(bob).get("/kb/namespaces", params={"archive_filter": "archived"}).json()["total"] == 0
    writes = http.as_(alice).post("/kb/documents", json={"namespace": "old", "path": "new.md", "content": "x"})
    assert writes.status_code == 404
    restored = http.as_(alice).patch("/kb/namespaces/old", json={"archived": False})
    assert restored.status_code == 200 and restored.json()["archived"] is False
    paths = {d["path"] for d in http.as_(bob).get("/kb/documents", params={"namespace": "old"}).json()["data"]}
    assert paths == {"a.md", "b.md"}  # c.md was archived on its own and stays archived


def test_namespace_not_found_is_indistinguishable(http, alice, bob):
    create_namespace(http, alice, "secret")
    hidden = http.as_(bob).get("/kb/namespaces/secret")
    missing = http.as_(bob).get("/kb/namespaces/never-existed")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == missing.json()
