"""Graph endpoints over real HTTP: neighbours (real depth), namespace graph, document links,
explicit link/unlink permissions, and cross-user visibility."""

from __future__ import annotations

import uuid

import pytest

from graph import selectors
from tests.conftest import create_document, create_namespace, grant
from tests.graph.conftest import link, references, revise

pytestmark = pytest.mark.django_db(transaction=True)


def ids(nodes: list[dict]) -> set[str]:
    return {node["document_id"] for node in nodes}


@pytest.fixture
def chain(http, alice, bob):
    """eng (others read): a -> b -> c -> d, all public; bob can read."""
    create_namespace(http, alice, "eng", others_can="read")
    docs = {name: create_document(http, alice, "eng", f"{name}.md", f"# {name}\n") for name in "abcd"}
    for source, target in (("a", "b"), ("b", "c"), ("c", "d")):
        revise(http, alice, docs[source]["id"], f"# {source}\n\n[{target}]({target}.md)\n")
    return docs


def neighbors(http, member, **params):
    return http.as_(member).get("/kb/graph/neighbors", params=params)


# --- neighbours ----------------------------------------------------------------------------


def test_depth_one_two_three_are_really_walked(http, alice, chain):
    a, b, c, d = (chain[n]["id"] for n in "abcd")
    for depth, expected in ((1, {b}), (2, {b, c}), (3, {b, c, d})):
        body = neighbors(http, alice, document_id=a, direction="out", depth=depth).json()
        assert ids(body["nodes"]) == expected, depth
        assert body["center"]["document_id"] == a
        assert body["truncated"] is False
    body = neighbors(http, alice, document_id=a, direction="out", depth=3).json()
    assert {n["document_id"]: n["depth"] for n in body["nodes"]} == {b: 1, c: 2, d: 3}
    assert {(e["source"], e["target"]) for e in body["edges"]} == {(a, b), (b, c), (c, d)}
    assert all(e["edge_type"] == "references" and e["confidence"] == 1.0 for e in body["edges"])


def test_direction_in_and_both(http, alice, chain):
    a, b, c, d = (chain[n]["id"] for n in "abcd")
    assert ids(neighbors(http, alice, document_id=d, direction="in", depth=3).json()["nodes"]) == {a, b, c}
    assert ids(neighbors(http, alice, document_id=d, direction="out", depth=3).json()["nodes"]) == set()
    assert ids(neighbors(http, alice, document_id=b).json()["nodes"]) == {a, c}


def test_node_shape(http, alice, chain):
    node = neighbors(http, alice, document_id=chain["a"]["id"]).json()["nodes"][0]
    assert set(node) >= {"document_id", "reference_uri", "uri", "url", "title", "icon", "path", "namespace"}
    assert set(node) >= {"kind", "status", "depth"}
    assert node["reference_uri"] == f"agor://kb/document/{chain['b']['id']}"
    assert node["uri"] == "agor://kb/eng/b.md" and node["url"].endswith("/ui/kb/eng/b.md")


def test_center_by_uri_or_path(http, alice, chain):
    a, b = chain["a"]["id"], chain["b"]["id"]
    for params in (
        {"uri": f"agor://kb/document/{a.upper()}"},
        {"uri": "agor://kb/eng/a.md"},
        {"namespace": "eng", "path": "a.md"},
    ):
        body = neighbors(http, alice, direction="out", **params).json()
        assert body["center"]["document_id"] == a and ids(body["nodes"]) == {b}, params


def test_edge_types_and_limit(http, alice, chain):
    a = chain["a"]["id"]
    extra = [create_document(http, alice, "eng", f"x{i}.md", "# x")["id"] for i in range(4)]
    for target in extra:
        assert link(http, alice, a, target, "depends_on").status_code == 201
    body = neighbors(http, alice, document_id=a, edge_types="depends_on", direction="out").json()
    assert ids(body["nodes"]) == set(extra) and {e["edge_type"] for e in body["edges"]} == {"depends_on"}
    body = neighbors(http, alice, document_id=a, edge_types="references,mentions").json()
    assert ids(body["nodes"]) == {chain["b"]["id"]}
    body = neighbors(http, alice, document_id=a, limit=3).json()
    assert len(body["nodes"]) == 3 and body["truncated"] is True


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"namespace": "eng"},
        {"document_id": "not-a-uuid"},
        {"uri": "https://example.com/a.md"},
        {"uri": "agor://kb/document/nope"},
        {"document_id": "{a}", "direction": "sideways"},
        {"document_id": "{a}", "depth": 4},
        {"document_id": "{a}", "depth": 0},
        {"document_id": "{a}", "limit": 101},
        {"document_id": "{a}", "edge_types": "references,contains"},
        {"document_id": "{a}", "uri": "agor://kb/eng/a.md"},
    ],
)
def test_bad_input_is_400(http, alice, chain, params):
    params = {k: (v.format(a=chain["a"]["id"]) if isinstance(v, str) else v) for k, v in params.items()}
    response = neighbors(http, alice, **params)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "invalid"


def test_missing_and_invisible_centers_are_the_same_404(http, alice, bob, chain):
    create_namespace(http, alice, "secret")
    hidden = create_document(http, alice, "secret", "s.md", "# s")
    missing = neighbors(http, bob, document_id=str(uuid.uuid4()))
    invisible = neighbors(http, bob, document_id=hidden["id"])
    by_path = neighbors(http, bob, namespace="secret", path="s.md")
    assert missing.status_code == invisible.status_code == by_path.status_code == 404
    assert missing.json() == invisible.json()


# --- cross-user visibility -----------------------------------------------------------------


@pytest.fixture
def private_world(http, alice, bob, chain):
    """a -> p (alice's private doc) -> e; a -> b. Bob can read eng, but not p."""
    p = create_document(http, alice, "eng", "private/p.md", "# P\n\n[e](../e.md)\n", visibility="private")
    e = create_document(http, alice, "eng", "e.md", "# E\n")
    revise(http, alice, p["id"], "# P\n\n[e](../e.md) [a](../a.md)\n")
    revise(http, alice, chain["a"]["id"], "# a\n\n[b](b.md) [p](private/p.md#secret-plan)\n")
    return {**chain, "p": p, "e": e}


def test_a_private_document_never_reaches_another_user(http, alice, bob, private_world):
    w = private_world
    a, b, p, e = w["a"]["id"], w["b"]["id"], w["p"]["id"], w["e"]["id"]

    mine = neighbors(http, alice, document_id=a, depth=2).json()
    assert p in ids(mine["nodes"]) and e in ids(mine["nodes"])

    theirs = neighbors(http, bob, document_id=a, depth=3).json()
    assert p not in ids(theirs["nodes"]) and e not in ids(theirs["nodes"])
    assert all(p not in (edge["source"], edge["target"]) for edge in theirs["edges"])
    assert neighbors(http, bob, document_id=p).status_code == 404

    graph = http.as_(bob).get("/kb/namespaces/eng/graph").json()
    assert p not in ids(graph["nodes"])
    assert all(p not in (edge["source"], edge["target"]) for edge in graph["edges"])
    assert (a, b) in {(edge["source"], edge["target"]) for edge in graph["edges"]}
    assert p in ids(http.as_(alice).get("/kb/namespaces/eng/graph").json()["nodes"])


def test_document_links_hide_unreadable_targets_like_missing_ones(http, alice, bob, private_world):
    w = private_world
    a, b, p = w["a"]["id"], w["b"]["id"], w["p"]["id"]
    revise(http, alice, a, "# a\n\n[b](b.md) [p](private/p.md#secret-plan) [gone](gone.md) [bad](../../x.md)\n")

    mine = http.as_(alice).get(f"/kb/documents/{a}/links").json()
    assert {item["document"]["document_id"] for item in mine["outgoing"]} == {b, p}
    assert [(item["href"], item["reason"]) for item in mine["unresolved"]] == [
        ("gone.md", "not_found"),
        ("../../x.md", "invalid"),
    ]
    assert {item["document"]["document_id"] for item in mine["backlinks"]} == {p}

    theirs = http.as_(bob).get(f"/kb/documents/{a}/links").json()
    assert {item["document"]["document_id"] for item in theirs["outgoing"]} == {b}
    assert theirs["backlinks"] == []
    unresolved = {item["href"]: item for item in theirs["unresolved"]}
    assert unresolved["private/p.md#secret-plan"]["reason"] == unresolved["gone.md"]["reason"] == "not_found"
    assert unresolved["private/p.md#secret-plan"]["detail"] == unresolved["gone.md"]["detail"] == ""

    b_links = http.as_(bob).get(f"/kb/documents/{b}/links").json()
    assert [item["document"]["document_id"] for item in b_links["backlinks"]] == [a]
    assert b_links["backlinks"][0]["edge_type"] == "references"
    assert http.as_(bob).get(f"/kb/documents/{p}/links").status_code == 404
    assert http.as_(bob).get("/kb/documents/not-a-uuid/links").status_code == 404


def test_archived_documents_leave_the_graph_and_come_back(http, alice, chain):
    a, b, c = (chain[n]["id"] for n in "abc")
    assert http.as_(alice).delete(f"/kb/documents/{b}").status_code == 200
    assert ids(neighbors(http, alice, document_id=a, direction="out", depth=3).json()["nodes"]) == set()
    assert b not in ids(http.as_(alice).get("/kb/namespaces/eng/graph").json()["nodes"])
    links = http.as_(alice).get(f"/kb/documents/{a}/links").json()
    assert links["outgoing"] == [] and links["unresolved"][0]["reason"] == "archived"
    archived_center = neighbors(http, alice, document_id=b, direction="out").json()
    assert archived_center["center"]["archived"] is True and ids(archived_center["nodes"]) == {c}

    assert http.as_(alice).patch(f"/kb/documents/{b}", json={"archived": False}).status_code == 200
    assert ids(neighbors(http, alice, document_id=a, direction="out", depth=2).json()["nodes"]) == {b, c}


# --- namespace graph -----------------------------------------------------------------------


def test_namespace_graph_drops_cross_namespace_edges_and_is_bounded(http, alice, bob, chain):
    a = chain["a"]["id"]
    create_namespace(http, alice, "ops", others_can="read")
    ops = create_document(http, alice, "ops", "run.md", "# run")
    revise(http, alice, a, "# a\n\n[b](b.md) [run](agor://kb/ops/run.md)\n")

    graph = http.as_(alice).get("/kb/namespaces/eng/graph").json()
    assert graph["namespace"] == "eng" and len(graph["nodes"]) == 4 and graph["truncated"] is False
    assert all(ops["id"] not in (e["source"], e["target"]) for e in graph["edges"])
    assert ops["id"] in ids(neighbors(http, alice, document_id=a).json()["nodes"])

    small = http.as_(alice).get("/kb/namespaces/eng/graph", params={"limit": 2}).json()
    assert [n["path"] for n in small["nodes"]] == ["a.md", "b.md"] and small["truncated"] is True
    assert {(e["source"], e["target"]) for e in small["edges"]} == {(a, chain["b"]["id"])}

    typed = http.as_(alice).get("/kb/namespaces/eng/graph", params={"edge_types": "depends_on"}).json()
    assert typed["edges"] == []


def test_namespace_graph_of_an_invisible_namespace_is_404(http, alice, bob, chain):
    create_namespace(http, alice, "secret")
    for member in (bob,):
        missing = http.as_(member).get("/kb/namespaces/nope/graph")
        hidden = http.as_(member).get("/kb/namespaces/secret/graph")
        assert missing.status_code == hidden.status_code == 404 and missing.json() == hidden.json()
    assert http.as_(None).get("/kb/namespaces/eng/graph").status_code == 401


# --- explicit links ------------------------------------------------------------------------


def test_link_upsert_archive_and_restore(http, alice, chain):
    a, c = chain["a"]["id"], chain["c"]["id"]
    created = link(http, alice, a, {"namespace": "eng", "path": "c.md"}, "depends_on", confidence=0.7)
    assert created.status_code == 201, created.text
    body = created.json()
    edge = body["edge"]
    assert body["created"] is True and edge["confidence"] == 0.7 and edge["archived"] is False
    assert edge["source"]["document_id"] == a and edge["target"]["document_id"] == c
    assert edge["created_by"] == "alice"

    again = link(http, alice, f"agor://kb/document/{a}", "agor://kb/eng/c.md", "depends_on")
    assert again.status_code == 200 and again.json()["created"] is False and again.json()["changed"] is False

    updated = link(http, alice, a, c, "depends_on", properties={"why": "build"})
    assert updated.json()["changed"] is True and updated.json()["edge"]["properties"] == {"why": "build"}

    removed = http.as_(alice).delete(f"/kb/graph/links/{edge['id']}")
    assert removed.status_code == 200 and removed.json()["edge"]["archived"] is True
    assert http.as_(alice).delete(f"/kb/graph/links/{edge['id']}").json()["changed"] is False
    assert c not in ids(neighbors(http, alice, document_id=a, edge_types="depends_on").json()["nodes"])

    restored = link(http, alice, a, c, "depends_on")
    assert restored.status_code == 200
    assert restored.json()["edge"]["id"] == edge["id"] and restored.json()["edge"]["archived"] is False
    assert restored.json()["edge"]["confidence"] == 0.7 and restored.json()["edge"]["properties"] == {"why": "build"}

    unlinked = link(http, alice, a, c, "depends_on", archived=True)
    assert unlinked.status_code == 200 and unlinked.json()["edge"]["archived"] is True
    assert link(http, alice, a, chain["d"]["id"], "mentions", archived=True).status_code == 404


def test_link_permissions(http, alice, bob, chain):
    a, b = chain["a"]["id"], chain["b"]["id"]
    create_namespace(http, bob, "bobs")
    mine = create_document(http, bob, "bobs", "mine.md", "# mine")["id"]
    create_namespace(http, alice, "secret")
    hidden = create_document(http, alice, "secret", "s.md", "# s")["id"]

    denied = link(http, bob, a, b)  # bob only reads eng
    assert denied.status_code == 403 and denied.json()["code"] == "permission_denied"
    assert link(http, bob, mine, a).status_code == 201  # write on the source, read on the target
    assert link(http, bob, hidden, mine).status_code == 404
    invisible = link(http, bob, mine, hidden)
    missing = link(http, bob, mine, str(uuid.uuid4()))
    assert invisible.status_code == missing.status_code == 404 and invisible.json() == missing.json()

    grant(http, alice, "eng", [("bob", "write")], others_can="read")
    assert link(http, bob, a, b).status_code == 403  # alice's document, owner edit policy

    edge_id = link(http, alice, a, b, "mentions").json()["edge"]["id"]
    assert http.as_(bob).delete(f"/kb/graph/links/{edge_id}").status_code == 403
    secret_edge = link(http, alice, hidden, a, "mentions").json()["edge"]["id"]
    assert http.as_(bob).delete(f"/kb/graph/links/{secret_edge}").status_code == 404
    assert http.as_(bob).delete(f"/kb/graph/links/{uuid.uuid4()}").status_code == 404
    assert http.as_(bob).delete("/kb/graph/links/not-an-id").status_code == 404


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"source": "{a}", "target": "{a}", "edge_type": "related_to"}, 400),
        ({"source": "{a}", "target": "{b}", "edge_type": "contains"}, 400),
        ({"source": "{a}", "target": "{b}", "edge_type": "related_to", "confidence": 1.5}, 400),
        ({"source": "{a}", "target": "{b}", "edge_type": "related_to", "properties": []}, 400),
        ({"source": {"namespace": "eng"}, "target": "{b}", "edge_type": "related_to"}, 400),
        ({"source": {"document_id": "{a}", "uri": "agor://kb/eng/a.md"}, "target": "{b}", "edge_type": "about"}, 400),
        ({"source": 42, "target": "{b}", "edge_type": "about"}, 400),
        ({"source": "not a uri", "target": "{b}", "edge_type": "about"}, 400),
        ({"target": "{b}", "edge_type": "about"}, 400),
    ],
)
def test_link_bad_input_is_400(http, alice, chain, body, code):
    def fill(value):
        if isinstance(value, str):
            return value.format(a=chain["a"]["id"], b=chain["b"]["id"])
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    response = http.as_(alice).post("/kb/graph/links", json=fill(body))
    assert response.status_code == code, response.text
    assert response.json()["code"] == "invalid"


def test_linking_an_archived_document_is_409(http, alice, chain):
    a, b = chain["a"]["id"], chain["b"]["id"]
    http.as_(alice).delete(f"/kb/documents/{b}")
    response = link(http, alice, a, b)
    assert response.status_code == 409 and response.json()["code"] == "document_archived"


def test_explicit_edges_survive_content_saves(http, alice, chain):
    a, c = chain["a"]["id"], chain["c"]["id"]
    edge_id = link(http, alice, a, c, "implements").json()["edge"]["id"]
    revise(http, alice, a, "# a\n\nrewritten without links\n")
    assert references(a) == {}
    body = neighbors(http, alice, document_id=a, direction="out").json()
    assert [(e["id"], e["edge_type"]) for e in body["edges"]] == [(edge_id, "implements")]


# --- query counts --------------------------------------------------------------------------


def test_neighbors_query_count_does_not_grow_with_the_graph(http, alice, chain, django_assert_max_num_queries):
    from knowledge.models import Document

    a = Document.objects.get(pk=chain["a"]["id"])
    for i in range(15):
        target = create_document(http, alice, "eng", f"fan/{i}.md", f"# {i}\n\n[a](../a.md)")["id"]
        link(http, alice, a.pk.hex, target, "mentions")
    actor = alice.actor
    with django_assert_max_num_queries(12):
        result = selectors.neighbors(actor=actor, document=a, depth=3, limit=100)
    assert len(result.nodes) == 18
