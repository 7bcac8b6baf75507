"""Tree, mentions and get/put by URL path, through the real HTTP server."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from knowledge.services import document_create
from tests.conftest import create_document, create_namespace, grant
from workspaces.models import Namespace, NamespaceACL
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db(transaction=True)

ELLIPSIS = "…"
DOC_NODE_KEYS = {"type", "icon", "title", "kind", "path", "uri", "reference_uri", "status"}
FOLDER_NODE_KEYS = {"type", "name", "path", "document_count", "children"}


def walk(nodes: list[dict]) -> list[dict]:
    out = []
    for node in nodes:
        out.append(node)
        out.extend(walk(node.get("children", [])))
    return out


def doc_paths(tree: list[dict]) -> list[str]:
    return [node["path"] for node in walk(tree) if node["type"] == "doc"]


def shape(nodes: list[dict]) -> list:
    """A compact picture of a tree: folders as (name, count, [children]), documents as paths."""
    return [
        (n["name"], n["document_count"], shape(n["children"])) if n["type"] == "folder" else n["path"] for n in nodes
    ]


@pytest.fixture
def eng(http, alice, bob):
    create_namespace(http, alice, "eng")
    grant(http, alice, "eng", [("bob", "read")])
    return "eng"


# --- tree ----------------------------------------------------------------------------------


def test_tree_shape_depth_grouping_and_ordering(http, alice, eng):
    for path in (
        "readme.md",
        "guides/setup.md",
        "guides/deploy/prod.md",
        "guides/deploy/aws/eks/cluster.md",
        "zeta/a.md",
        "alpha.md",
    ):
        create_document(http, alice, eng, path, "# Body\n\nsecret text")
    response = http.as_(alice).get(f"/kb/namespaces/{eng}/tree", params={"depth": 2})
    assert response.status_code == 200, response.text
    body = response.json()
    assert shape(body["tree"]) == [
        (
            "guides",
            3,
            [
                ("deploy", 2, [(ELLIPSIS, 1, ["guides/deploy/aws/eks/cluster.md"]), "guides/deploy/prod.md"]),
                "guides/setup.md",
            ],
        ),
        ("zeta", 1, ["zeta/a.md"]),
        "alpha.md",
        "readme.md",
    ]
    hidden = walk(body["tree"])[2]
    assert hidden["path"] == f"guides/deploy/{ELLIPSIS}"
    assert {k: body[k] for k in ("namespace", "path_prefix", "depth", "count", "truncated", "total")} == {
        "namespace": "eng",
        "path_prefix": None,
        "depth": 2,
        "count": 6,
        "truncated": False,
        "total": 6,
    }
    assert body["pagination"] == {"limit": 25, "offset": 0, "has_more": False, "next_offset": None}
    for node in walk(body["tree"]):
        assert set(node) == (DOC_NODE_KEYS if node["type"] == "doc" else FOLDER_NODE_KEYS)
    assert "secret text" not in response.text and "current_version" not in response.text
    setup = next(n for n in walk(body["tree"]) if n.get("path") == "guides/setup.md")
    assert setup["uri"] == "agor://kb/eng/guides/setup.md"
    assert setup["reference_uri"].startswith("agor://kb/document/")
    assert setup["title"] == "Body" and setup["kind"] == "doc" and setup["status"] == "published"
    # Default depth 3 shows aws but groups eks.
    default = http.as_(alice).get(f"/kb/namespaces/{eng}/tree").json()
    assert default["depth"] == 3
    assert f"guides/deploy/aws/{ELLIPSIS}" in [n["path"] for n in walk(default["tree"])]


def test_tree_path_prefix_is_normalised_and_a_document_at_the_prefix_is_at_the_root(http, alice, eng):
    for path in ("guides", "guides/intro.md", "guides/ops/run.md", "guidesx/other.md", "top.md"):
        create_document(http, alice, eng, path)
    body = http.as_(alice).get(f"/kb/namespaces/{eng}/tree", params={"path_prefix": "/guides//"}).json()
    assert body["path_prefix"] == "guides" and body["total"] == 3
    assert shape(body["tree"]) == [("ops", 1, ["guides/ops/run.md"]), "guides", "guides/intro.md"]
    assert body["tree"][0]["path"] == "guides/ops"
    empty = http.as_(alice).get(f"/kb/namespaces/{eng}/tree", params={"path_prefix": "//"}).json()
    assert empty["path_prefix"] is None and empty["total"] == 5


def test_tree_paginates_documents_by_path(http, alice, eng):
    for i in range(5):
        create_document(http, alice, eng, f"f/d{i}.md")
    client = http.as_(alice)
    first = client.get(f"/kb/namespaces/{eng}/tree", params={"limit": 2}).json()
    assert doc_paths(first["tree"]) == ["f/d0.md", "f/d1.md"]
    assert first["count"] == 2 and first["total"] == 5 and first["truncated"] is True
    assert first["tree"][0]["document_count"] == 2
    assert first["pagination"] == {"limit": 2, "offset": 0, "has_more": True, "next_offset": 2}
    last = client.get(f"/kb/namespaces/{eng}/tree", params={"limit": 2, "offset": 4}).json()
    assert doc_paths(last["tree"]) == ["f/d4.md"] and last["truncated"] is False
    assert last["pagination"] == {"limit": 2, "offset": 4, "has_more": False, "next_offset": None}
    beyond = client.get(f"/kb/namespaces/{eng}/tree", params={"offset": 50}).json()
    assert beyond["tree"] == [] and beyond["count"] == 0 and beyond["total"] == 5


def test_tree_filters_kind_and_status(http, alice, eng):
    create_document(http, alice, eng, "a.md", kind="guide")
    create_document(http, alice, eng, "b.md", status="draft")
    client = http.as_(alice)
    assert doc_paths(client.get(f"/kb/namespaces/{eng}/tree", params={"kind": "guide"}).json()["tree"]) == ["a.md"]
    drafts = client.get(f"/kb/namespaces/{eng}/tree", params={"status": "draft"}).json()
    assert doc_paths(drafts["tree"]) == ["b.md"]
    mine_hidden = client.get(f"/kb/namespaces/{eng}/tree", params={"include_my_drafts": "false"}).json()
    assert doc_paths(mine_hidden["tree"]) == ["a.md"]


def test_tree_hides_unreadable_drafts_of_others_and_archived_documents(http, alice, bob, eng):
    create_document(http, alice, eng, "public.md")
    create_document(http, alice, eng, "private.md", visibility="private")
    create_document(http, alice, eng, "draft.md", status="draft")
    archived = create_document(http, alice, eng, "old.md")
    assert http.as_(alice).delete(f"/kb/documents/{archived['id']}").status_code == 200
    bob_client = http.as_(bob)
    url = f"/kb/namespaces/{eng}/tree"
    assert doc_paths(bob_client.get(url).json()["tree"]) == ["public.md"]
    with_drafts = bob_client.get(url, params={"include_other_user_drafts": "true"}).json()
    assert doc_paths(with_drafts["tree"]) == ["draft.md", "public.md"]
    assert doc_paths(bob_client.get(url, params={"archive_filter": "archived"}).json()["tree"]) == ["old.md"]
    assert doc_paths(bob_client.get(url, params={"archive_filter": "all"}).json()["tree"]) == ["old.md", "public.md"]
    assert doc_paths(bob_client.get(url, params={"include_archived": "true"}).json()["tree"]) == [
        "old.md",
        "public.md",
    ]
    alice_view = http.as_(alice).get(url).json()
    assert doc_paths(alice_view["tree"]) == ["draft.md", "private.md", "public.md"]
    assert bob_client.get(url, params={"archive_filter": "all"}).json()["total"] == 2


def test_tree_of_an_invisible_namespace_is_404_like_a_missing_one(http, alice, bob):
    create_namespace(http, alice, "secret")
    create_document(http, alice, "secret", "a.md")
    invisible = http.as_(bob).get("/kb/namespaces/secret/tree")
    missing = http.as_(bob).get("/kb/namespaces/nothing-here/tree")
    assert invisible.status_code == missing.status_code == 404
    assert invisible.json() == missing.json() and invisible.json()["code"] == "not_found"


@pytest.mark.parametrize(
    "params",
    [
        {"depth": 0},
        {"depth": 11},
        {"depth": "x"},
        {"limit": 0},
        {"limit": 101},
        {"offset": -1},
        {"kind": "nope"},
        {"status": "nope"},
        {"archive_filter": "gone"},
        {"path_prefix": "../etc"},
        {"path_prefix": "a/con"},
        {"include_my_drafts": "maybe"},
    ],
)
def test_tree_bad_input_is_400_invalid(http, alice, eng, params):
    response = http.as_(alice).get(f"/kb/namespaces/{eng}/tree", params=params)
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["code"] == "invalid" and set(body["errors"]) == set(params)


def test_tree_without_token_is_401(http, eng):
    assert http.get(f"/kb/namespaces/{eng}/tree").status_code == 401


# --- mentions ------------------------------------------------------------------------------


def test_mentions_rank_exact_then_prefix_then_contains(http, alice, eng):
    for path, title in [
        ("n/1.md", "Cluster setup"),
        ("setup/notes.md", "Notes"),
        ("n/2.md", "Setup guide"),
        ("n/3.md", "Setup"),
        ("ops/old-setup.md", "Old"),
        ("n/4.md", "Unrelated"),
    ]:
        create_document(http, alice, eng, path, "body", title=title)
    response = http.as_(alice).get("/kb/mentions", params={"q": "setup"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [m["title"] for m in body["data"]] == ["Setup", "Setup guide", "Notes", "Cluster setup", "Old"]
    assert body["query"] == "setup" and body["count"] == 5 and body["limit"] == 8 and body["namespace"] is None
    first = body["data"][0]
    assert set(first) == {"id", "title", "path", "namespace", "icon", "reference_uri", "url", "markdown_link"}
    assert first["reference_uri"] == f"agor://kb/document/{first['id']}"
    assert first["markdown_link"] == f"[Setup](agor://kb/document/{first['id']})"
    assert first["url"].endswith("/ui/kb/eng/n/3.md") and first["namespace"] == "eng"
    upper = http.as_(alice).get("/kb/mentions", params={"q": "  SETUP "}).json()
    assert [m["id"] for m in upper["data"]] == [m["id"] for m in body["data"]]
    assert len(http.as_(alice).get("/kb/mentions", params={"q": "setup", "limit": 2}).json()["data"]) == 2


def test_mentions_escape_like_wildcards_and_markdown(http, alice, eng):
    create_document(http, alice, eng, "p1.md", "x", title="100% done")
    create_document(http, alice, eng, "p2.md", "x", title="1000 done")
    create_document(http, alice, eng, "p3.md", "x", title="a_b")
    create_document(http, alice, eng, "p4.md", "x", title="axb")
    weird = create_document(http, alice, eng, "p5.md", "x", title="Link [x] \\ y")
    client = http.as_(alice)
    assert [m["title"] for m in client.get("/kb/mentions", params={"q": "100%"}).json()["data"]] == ["100% done"]
    assert [m["title"] for m in client.get("/kb/mentions", params={"q": "a_b"}).json()["data"]] == ["a_b"]
    assert client.get("/kb/mentions", params={"q": "%"}).json()["count"] == 1
    (hit,) = client.get("/kb/mentions", params={"q": "[x]"}).json()["data"]
    assert hit["markdown_link"] == f"[Link \\[x\\] \\\\ y](agor://kb/document/{weird['id']})"


def test_empty_query_lists_recently_updated_documents(http, alice, eng):
    older = create_document(http, alice, eng, "older.md", "x")
    create_document(http, alice, eng, "newer.md", "x")
    client = http.as_(alice)
    assert [m["path"] for m in client.get("/kb/mentions").json()["data"]] == ["newer.md", "older.md"]
    assert client.post(f"/kb/documents/{older['id']}/revise", json={"content": "y"}).status_code == 200
    assert [m["path"] for m in client.get("/kb/mentions", params={"q": ""}).json()["data"]] == [
        "older.md",
        "newer.md",
    ]


def test_mentions_only_readable_active_documents_and_the_limit_comes_after_access(http, alice, bob, eng):
    for i in range(5):
        create_document(http, alice, eng, f"private/plan{i}.md", "x", title="Plan", visibility="private")
    create_document(http, alice, eng, "plan-a.md", "x", title="Plan a")
    create_document(http, alice, eng, "plan-b.md", "x", title="Plan b")
    old = create_document(http, alice, eng, "plan-old.md", "x", title="Plan")
    http.as_(alice).delete(f"/kb/documents/{old['id']}")
    create_namespace(http, alice, "secret")
    create_document(http, alice, "secret", "plan.md", "x", title="Plan")
    body = http.as_(bob).get("/kb/mentions", params={"q": "plan", "limit": 2}).json()
    assert [m["path"] for m in body["data"]] == ["plan-a.md", "plan-b.md"]
    assert http.as_(bob).get("/kb/mentions", params={"q": "plan"}).json()["count"] == 2
    assert http.as_(alice).get("/kb/mentions", params={"q": "plan", "limit": 50}).json()["count"] == 8
    scoped = http.as_(alice).get("/kb/mentions", params={"q": "plan", "namespace": "secret"}).json()
    assert [m["namespace"] for m in scoped["data"]] == ["secret"] and scoped["namespace"] == "secret"


def test_mentions_bad_input_and_invisible_namespace(http, alice, bob, eng):
    create_namespace(http, alice, "secret")
    client = http.as_(bob)
    for params in ({"limit": 0}, {"limit": 51}, {"q": "x" * 201}):
        response = client.get("/kb/mentions", params=params)
        assert response.status_code == 400 and response.json()["code"] == "invalid", params
    invisible = client.get("/kb/mentions", params={"namespace": "secret"})
    missing = client.get("/kb/mentions", params={"namespace": "missing"})
    assert invisible.status_code == missing.status_code == 404 and invisible.json() == missing.json()


# --- get/put by URL path -------------------------------------------------------------------


def url(namespace: str, path: str) -> str:
    return f"/kb/namespaces/{namespace}/documents/{quote(path)}"


def versions(http, member, document_id: str) -> int:
    return http.as_(member).get(f"/kb/documents/{document_id}/versions").json()["total"]


def test_put_creates_then_identical_put_is_a_no_op(http, alice, eng):
    client = http.as_(alice)
    created = client.put(url(eng, "guides/setup.md"), json={"content": "# Setup\n\nSteps.", "kind": "guide"})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["created"] is True and body["changed"] is True
    document = body["document"]
    assert document["path"] == "guides/setup.md" and document["title"] == "Setup" and document["kind"] == "guide"
    assert "content" not in document and document["current_version"]["number"] == 1
    again = client.put(url(eng, "guides/setup.md"), json={"content": "# Setup\n\nSteps.", "kind": "guide"})
    assert again.status_code == 200
    assert again.json()["created"] is False and again.json()["changed"] is False
    assert versions(http, alice, document["id"]) == 1
    fetched = client.get(url(eng, "guides/setup.md"))
    assert fetched.status_code == 200 and fetched.json()["content"] == "# Setup\n\nSteps."
    assert fetched.json()["id"] == document["id"]
    lean = client.get(url(eng, "guides/setup.md"), params={"include_content": "false"}).json()
    assert "content" not in lean
    # The path is normalised like everywhere else.
    assert client.get(f"/kb/namespaces/{eng}/documents//guides//setup.md").json()["id"] == document["id"]


def test_put_with_expected_version_and_stale_conflict(http, alice, eng):
    client = http.as_(alice)
    doc = client.put(url(eng, "a.md"), json={"content": "v1"}).json()["document"]
    updated = client.put(url(eng, "a.md"), json={"content": "v2", "expected_version": 1, "change_summary": "two"})
    assert updated.status_code == 200 and updated.json()["changed"] is True
    assert updated.json()["document"]["current_version"]["number"] == 2
    stale = client.put(url(eng, "a.md"), json={"content": "v3", "expected_version": 1})
    assert stale.status_code == 409 and stale.json()["code"] == "version_conflict"
    assert stale.json()["current_version"]["number"] == 2
    by_id = client.put(url(eng, "a.md"), json={"content": "v3", "expected_version": doc["current_version"]["id"]})
    assert by_id.status_code == 409
    assert client.get(url(eng, "a.md")).json()["content"] == "v2"
    missing = client.put(url(eng, "new.md"), json={"content": "x", "expected_version": 3})
    assert missing.status_code == 409 and missing.json()["code"] == "version_conflict"


def test_put_metadata_only_changes_create_no_version(http, alice, eng):
    client = http.as_(alice)
    doc = client.put(url(eng, "m.md"), json={"content": "body"}).json()["document"]
    changed = client.put(url(eng, "m.md"), json={"icon": "🚀", "title": "Renamed", "metadata": {"team": "a"}})
    assert changed.status_code == 200, changed.text
    body = changed.json()
    assert body["changed"] is True and body["created"] is False
    assert body["document"]["icon"] == "🚀" and body["document"]["title"] == "Renamed"
    assert body["document"]["metadata"] == {"team": "a"}
    assert versions(http, alice, doc["id"]) == 1
    same = client.put(url(eng, "m.md"), json={"icon": "🚀"})
    assert same.status_code == 200 and same.json()["changed"] is False
    no_content = client.put(url(eng, "none.md"), json={"title": "No body"})
    assert no_content.status_code == 400 and no_content.json()["code"] == "invalid"


def test_put_with_a_different_body_path_moves_the_document(http, alice, eng):
    client = http.as_(alice)
    doc = client.put(url(eng, "drafts/plan.md"), json={"content": "plan"}).json()["document"]
    moved = client.put(url(eng, "drafts/plan.md"), json={"content": "plan", "path": "/final//plan.md"})
    assert moved.status_code == 200, moved.text
    assert moved.json()["changed"] is True and moved.json()["document"]["path"] == "final/plan.md"
    assert moved.json()["document"]["id"] == doc["id"]
    assert client.get(url(eng, "drafts/plan.md")).status_code == 404
    assert client.get(url(eng, "final/plan.md")).json()["id"] == doc["id"]
    assert versions(http, alice, doc["id"]) == 1
    same = client.put(url(eng, "final/plan.md"), json={"path": "final/plan.md"})
    assert same.status_code == 200 and same.json()["changed"] is False


def test_a_failed_move_rolls_back_the_whole_put(http, alice, eng):
    client = http.as_(alice)
    doc = client.put(url(eng, "a.md"), json={"content": "a"}).json()["document"]
    client.put(url(eng, "b.md"), json={"content": "b"})
    taken = client.put(url(eng, "a.md"), json={"content": "a2", "path": "b.md"})
    assert taken.status_code == 409 and taken.json()["code"] == "path_taken"
    assert client.get(url(eng, "a.md")).json()["content"] == "a"
    assert versions(http, alice, doc["id"]) == 1
    created_then_blocked = client.put(url(eng, "c.md"), json={"content": "c", "path": "b.md"})
    assert created_then_blocked.status_code == 409
    assert client.get(url(eng, "c.md")).status_code == 404


def test_put_can_create_the_namespace(http, alice, make_member, other_workspace):
    client = http.as_(alice)
    missing = client.put(url("fresh", "a.md"), json={"content": "x"})
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    created = client.put(
        url("fresh", "notes/a.md"),
        json={"content": "# A\n", "create_namespace": True, "namespace_display_name": "Fresh notes"},
    )
    assert created.status_code == 201, created.text
    assert created.json()["document"]["namespace"] == "fresh"
    namespace = client.get("/kb/namespaces/fresh").json()
    assert namespace["display_name"] == "Fresh notes" and namespace["owner"] == "alice"
    assert namespace["effective_permission"] == "own"
    # Once it exists, the flag is harmless.
    again = client.put(url("fresh", "notes/b.md"), json={"content": "b", "create_namespace": True})
    assert again.status_code == 201
    # The same slug in another workspace does not count as existing here.
    namespace_create(actor=make_member("member", workspace_=other_workspace).actor, slug="elsewhere")
    across = client.put(url("elsewhere", "a.md"), json={"content": "x", "create_namespace": True})
    assert across.status_code == 201 and Namespace.objects.filter(slug="elsewhere").count() == 2
    bad = client.put(url("Bad_Slug", "a.md"), json={"content": "x", "create_namespace": True})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid"
    # A write that fails leaves no namespace behind.
    no_content = client.put(url("empty-ns", "a.md"), json={"create_namespace": True})
    assert no_content.status_code == 400
    assert client.get("/kb/namespaces/empty-ns").status_code == 404


def test_put_never_creates_over_an_invisible_or_archived_namespace(http, alice, bob):
    create_namespace(http, alice, "secret")
    create_namespace(http, alice, "attic")
    assert http.as_(alice).delete("/kb/namespaces/attic").status_code == 200
    client = http.as_(bob)
    body = {"content": "x", "create_namespace": True}
    invisible = client.put(url("secret", "a.md"), json=body)
    archived = client.put(url("attic", "a.md"), json=body)
    missing = client.put(url("missing", "a.md"), json={"content": "x"})
    assert invisible.status_code == archived.status_code == missing.status_code == 404
    assert invisible.json() == archived.json() == missing.json()
    secret = Namespace.objects.get(slug="secret")
    assert secret.owner.username == "alice" and not secret.documents.exists()
    assert Namespace.objects.filter(slug__in=["secret", "attic"]).count() == 2


def test_get_and_put_respect_document_access(http, alice, bob, eng):
    create_document(http, alice, eng, "private.md", visibility="private")
    create_document(http, alice, eng, "public.md")
    client = http.as_(bob)
    hidden = client.get(url(eng, "private.md"))
    missing = client.get(url(eng, "nothing.md"))
    assert hidden.status_code == missing.status_code == 404 and hidden.json() == missing.json()
    assert client.get(url(eng, "public.md")).status_code == 200
    read_only = client.put(url(eng, "public.md"), json={"content": "changed"})
    assert read_only.status_code == 403 and read_only.json()["code"] == "permission_denied"
    assert client.put(url(eng, "new.md"), json={"content": "x"}).status_code == 403


def test_get_by_path_archive_filter(http, alice, eng):
    client = http.as_(alice)
    doc = client.put(url(eng, "old.md"), json={"content": "x"}).json()["document"]
    client.delete(f"/kb/documents/{doc['id']}")
    assert client.get(url(eng, "old.md")).status_code == 404
    assert client.get(url(eng, "old.md"), params={"archive_filter": "archived"}).json()["id"] == doc["id"]
    blocked = client.put(url(eng, "old.md"), json={"content": "y"})
    assert blocked.status_code == 409 and blocked.json()["code"] == "document_archived"


@pytest.mark.parametrize(
    "body",
    [
        {"content": 5},
        {"content": "x", "kind": "nope"},
        {"content": "x", "create_namespace": "sometimes"},
        {"content": "x", "path": ""},
        {"content": "x", "metadata": []},
    ],
)
def test_put_bad_body_is_400_invalid(http, alice, eng, body):
    response = http.as_(alice).put(url(eng, "a.md"), json=body)
    assert response.status_code == 400 and response.json()["code"] == "invalid", response.text


@pytest.mark.parametrize("path", ["a/%2E%2E/b.md", "con.md", "what%3F.md", "a/b.", "a%00b.md"])
def test_unsafe_url_paths_are_400(http, alice, eng, path):
    response = http.as_(alice).put(f"/kb/namespaces/{eng}/documents/{path}", json={"content": "x"})
    assert response.status_code == 400 and response.json()["code"] in ("invalid_path", "invalid")


# --- query counts --------------------------------------------------------------------------


def _queries(member, path: str, params: dict) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {member.token}")
    client.get("/kb/me")  # the token's first use records last_used_at once; keep it out of the count
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path, params)
    assert response.status_code == 200, response.content
    return len(captured)


def test_tree_and_mentions_queries_do_not_grow_with_the_namespace(make_member):
    owner = make_member("member", username="nowner")
    reader = make_member("member", username="nreader")
    namespace = namespace_create(actor=owner.actor, slug="big")
    NamespaceACL.objects.create(namespace=namespace, user=reader.user, permission="read")

    def add(count: int, start: int) -> None:
        for i in range(start, start + count):
            document_create(
                actor=owner.actor, namespace=namespace, path=f"f{i % 3}/g{i % 5}/h/i/d{i}.md", content=f"# Doc {i}\n"
            )

    add(3, 0)
    counts = {who: [] for who in ("owner", "reader")}
    for member, key in ((owner, "owner"), (reader, "reader")):
        counts[key].append(_queries(member, "/kb/namespaces/big/tree", {"limit": 100}))
        counts[key].append(_queries(member, "/kb/mentions", {"q": "doc", "limit": 50}))
    add(60, 3)
    for member, key in ((owner, "owner"), (reader, "reader")):
        counts[key].append(_queries(member, "/kb/namespaces/big/tree", {"limit": 100, "depth": 1}))
        counts[key].append(_queries(member, "/kb/mentions", {"q": "doc", "limit": 50}))
    for tree_small, mention_small, tree_large, mention_large in counts.values():
        assert tree_small == tree_large <= 8
        assert mention_small == mention_large <= 8
