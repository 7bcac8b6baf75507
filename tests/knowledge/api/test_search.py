"""Text search through the real HTTP server, on a corpus with realistic structure."""

from __future__ import annotations

import random

import pytest
from django.db import connection

from knowledge import search as search_module
from knowledge.services import document_create, document_revise, document_set_archived, document_update
from workspaces.models import NamespaceACL
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db(transaction=True)

FILLER = [
    "The service keeps every change as an immutable version so nothing is lost.",
    "Teams organise documents in namespaces with their own access lists.",
    "Agents read and write through tools that return bounded results.",
    "Operators move namespaces between deployments with a folder format.",
    "Rendering turns markdown into safe HTML with highlighted code blocks.",
    "Search ranks documents by relevance and respects every permission.",
    "Backups run nightly and are kept for thirty days in cold storage.",
    "The release checklist covers migrations, smoke tests and rollbacks.",
]


def _body(rng: random.Random, extra: str = "", paragraphs: int = 6) -> str:
    parts = ["## Overview", rng.choice(FILLER)]
    for i in range(paragraphs):
        parts.append(f"### Part {i}")
        parts.append(" ".join(rng.choice(FILLER) for _ in range(3)))
        if i == 2 and extra:
            parts.append(extra)
    return "\n\n".join(parts) + "\n"


@pytest.fixture
def corpus(alice, bob):
    rng = random.Random(7)
    eng = namespace_create(actor=alice.actor, slug="eng", others_can="read")
    ops = namespace_create(actor=alice.actor, slug="ops", others_can="read")
    secret = namespace_create(actor=alice.actor, slug="secret")
    docs = {}

    def make(ns, path, title_line, extra="", **fields):
        content = f"# {title_line}\n\n{_body(rng, extra)}"
        docs[path] = document_create(actor=alice.actor, namespace=ns, path=path, content=content, **fields)
        return docs[path]

    make(eng, "guides/deploy.md", "Deploying the service", "Run the blue green deployment script to switch traffic.")
    make(eng, "guides/scattered.md", "Traffic notes", "Green lights. Later, much later, blue skies and a deployment.")
    make(eng, "guides/password-reset.md", "Password reset", "Users who forget their password request a reset link.")
    make(eng, "notes/body-mentions-kubernetes.md", "Cluster notes", "We run kubernetes for the batch jobs.")
    make(eng, "kubernetes.md", "Kubernetes", "An introduction.")
    make(eng, "notes/postgres-tuning.md", "Database tuning", "Tune shared_buffers and work_mem for PostgreSQL.")
    make(eng, "notes/running.md", "Runbook", "The runner runs jobs every hour.")
    make(ops, "incident/2026-01.md", "Incident January", "The outage was caused by an expired certificate.")
    make(ops, "incident/2026-02.md", "Incident February", "Certificate renewal automation failed quietly.")
    make(eng, "private/plans.md", "Private plans", "The zeppelin acquisition is confidential.", visibility="private")
    make(secret, "roadmap.md", "Roadmap", "zeppelin launch in spring")
    for i in range(30):
        make(eng, f"bulk/page-{i:02d}.md", f"Bulk page {i}", "widget maintenance procedures")
    return docs


def search(http, member, **params):
    response = http.as_(member).get("/kb/search", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def paths(body):
    return [hit["document"]["path"] for hit in body["data"]]


def test_phrase_beats_scattered_words(http, bob, corpus):
    body = search(http, bob, q="blue green deployment")
    assert paths(body)[0] == "guides/deploy.md"
    assert "guides/scattered.md" in paths(body)
    phrase = search(http, bob, q='"blue green"')
    assert paths(phrase) == ["guides/deploy.md"]


def test_title_beats_body(http, bob, corpus):
    body = search(http, bob, q="kubernetes")
    assert paths(body)[:2] == ["kubernetes.md", "notes/body-mentions-kubernetes.md"]


def test_exclusion_excludes(http, bob, corpus):
    both = paths(search(http, bob, q="certificate"))
    assert set(both) == {"incident/2026-01.md", "incident/2026-02.md"}
    assert paths(search(http, bob, q="certificate -renewal")) == ["incident/2026-01.md"]


def test_excluding_a_phrase_keeps_the_words_apart(http, bob, corpus):
    assert {"guides/deploy.md", "guides/scattered.md"} <= set(paths(search(http, bob, q="deployment", limit=50)))
    found = paths(search(http, bob, q='deployment -"blue green"', limit=50))
    assert "guides/scattered.md" in found  # blue and green, but not side by side
    assert "guides/deploy.md" not in found


def test_or_and_prefix(http, bob, corpus):
    assert set(paths(search(http, bob, q="outage OR renewal"))) == {"incident/2026-01.md", "incident/2026-02.md"}
    assert "notes/postgres-tuning.md" in paths(search(http, bob, q="postg*"))
    assert paths(search(http, bob, q="postg")) == []  # no prefix without the star


def test_a_prefix_counts_its_words_as_one_term(http, alice, bob, corpus):
    """A page that keeps using a common completion outranks one that mentions a rare completion
    once: which word completes the prefix does not weigh on its own."""
    eng = corpus["guides/deploy.md"].namespace
    for i in range(6):
        document_create(
            actor=alice.actor, namespace=eng, path=f"pfx/common-{i}.md", content=f"# Note {i}\n\nzorblax once.\n"
        )
    document_create(
        actor=alice.actor, namespace=eng, path="pfx/often.md", content="# Often\n\nzorblax zorblax zorblax zorblax.\n"
    )
    document_create(actor=alice.actor, namespace=eng, path="pfx/rare.md", content="# Rare\n\nzorbquist and more.\n")
    found = paths(search(http, bob, q="zorb*", limit=50))
    assert found[0] == "pfx/often.md"
    assert set(found) == {"pfx/often.md", "pfx/rare.md", *(f"pfx/common-{i}.md" for i in range(6))}


def test_stemming_matches_word_forms(http, bob, corpus):
    assert "notes/running.md" in paths(search(http, bob, q="run"))
    assert "guides/password-reset.md" in paths(search(http, bob, q="forgetting passwords"))


def test_natural_language_question_is_relaxed(http, bob, corpus):
    body = search(http, bob, q="How can I get a new password when I forgot mine?")
    assert body["relaxed"] is True
    assert paths(body)[0] == "guides/password-reset.md"
    strict = search(http, bob, q='"forgot mine"')
    assert strict["total"] == 0 and strict["relaxed"] is False


def test_documents_matching_every_word_come_first(http, bob, corpus):
    body = search(http, bob, q="certificate outage")
    assert paths(body)[0] == "incident/2026-01.md"
    assert body["data"][0]["coverage"] == 2 and body["data"][1]["coverage"] == 1


def test_unreadable_and_archived_never_appear(http, alice, bob, corpus):
    for q in ("zeppelin", "confidential", "roadmap", "private plans"):
        body = search(http, bob, q=q)
        assert body["total"] == 0, q
        assert "zeppelin" not in str(body["data"]).lower()
    assert set(paths(search(http, alice, q="zeppelin"))) == {"private/plans.md", "roadmap.md"}
    document_set_archived(actor=alice.actor, document_id=corpus["guides/deploy.md"].pk, archived=True)
    assert "guides/deploy.md" not in paths(search(http, bob, q="deployment"))
    assert "guides/deploy.md" in paths(search(http, alice, q="deployment", archive_filter="archived"))


def test_first_page_is_full_when_enough_readable_matches_exist(http, alice, bob, corpus):
    hidden = namespace_create(actor=alice.actor, slug="hidden")
    for i in range(40):
        document_create(
            actor=alice.actor, namespace=hidden, path=f"w{i}.md", content="widget widget widget maintenance"
        )
    body = search(http, bob, q="widget maintenance", limit=20)
    assert len(body["data"]) == 20 and body["total"] == 30
    assert all(hit["namespace"]["slug"] == "eng" for hit in body["data"])


def test_pagination_is_stable_and_complete(http, bob, corpus):
    seen = []
    for offset in range(0, 40, 7):
        seen += paths(search(http, bob, q="widget", limit=7, offset=offset))
    assert len(seen) == len(set(seen)) == 30
    again = []
    for offset in range(0, 40, 7):
        again += paths(search(http, bob, q="widget", limit=7, offset=offset))
    assert seen == again
    beyond = search(http, bob, q="widget", offset=500)
    assert beyond["total"] == 30 and beyond["data"] == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's side-by-side bonus has a window")
@pytest.mark.parametrize("window", [3, 200])
def test_words_side_by_side_move_up_within_the_proximity_window(http, alice, monkeypatch, window):
    """A relaxed query's documents holding every word side by side move up among the first
    PROXIMITY_WINDOW by score; the rest keep their order, and pages across the edge join up."""
    place = namespace_create(actor=alice.actor, slug="prox")
    # More repetitions score higher. n1, n4 and n7 also hold the words next to each other: n1
    # ranks second by score, n4 and n7 below the documents without the pair.
    repetitions = {0: 8, 1: 5, 4: 1, 7: 1}
    together = {"n1.md", "n4.md", "n7.md"}
    for i in range(9):
        content = f"# Note {i}\n\n" + " ".join(["walrus filler text", "opal more filler"] * repetitions.get(i, 3))
        if f"n{i}.md" in together:
            content += "\n\nA walrus opal sighting."
        document_create(actor=alice.actor, namespace=place, path=f"n{i}.md", content=content + "\n")
    document_create(actor=alice.actor, namespace=place, path="one-word.md", content="walrus walrus walrus walrus\n")

    monkeypatch.setattr(search_module, "PROXIMITY_WINDOW", 0)
    by_score = paths(search(http, alice, q="walrus opal", limit=100))
    assert by_score[-1] == "one-word.md"  # covering one word of two ranks last whatever its score
    monkeypatch.setattr(search_module, "PROXIMITY_WINDOW", window)
    head = by_score[:window]
    expected = [p for p in head if p in together] + [p for p in head if p not in together] + by_score[window:]
    assert expected != by_score  # the bonus changes this order
    assert paths(search(http, alice, q="walrus opal", limit=100)) == expected
    pages = []
    for offset in range(0, 10, 2):
        pages += paths(search(http, alice, q="walrus opal", limit=2, offset=offset))
    assert pages == expected


def test_index_follows_revisions_renames_and_moves(http, alice, bob, corpus):
    doc = corpus["notes/postgres-tuning.md"]
    document_revise(actor=alice.actor, document_id=doc.pk, content="# Database tuning\n\nNow about vacuum.\n")
    assert paths(search(http, bob, q="shared_buffers")) == []
    assert paths(search(http, bob, q="vacuum")) == ["notes/postgres-tuning.md"]
    document_update(actor=alice.actor, document_id=doc.pk, changes={"title": "Zebra handbook", "path": "zoo/z.md"})
    assert paths(search(http, bob, q="zebra")) == ["zoo/z.md"]
    assert paths(search(http, bob, q="zoo")) == ["zoo/z.md"]


def test_hit_shape_snippets_and_content_modes(http, bob, corpus):
    body = search(http, bob, q="expired certificate", snippet_lines=1)
    hit = body["data"][0]
    assert hit["document"]["reference_uri"] == f"agor://kb/document/{hit['document']['id']}"
    assert hit["document"]["url"].endswith("/ui/kb/ops/incident/2026-01.md")
    assert set(hit["current_version"]) == {"id", "number", "sha256"}
    assert hit["mode"] == "text" and hit["score"] > 0
    assert "expired certificate" in hit["snippet"]["text"]
    assert hit["snippet"]["text"].count("\n") <= 1
    assert "content" not in hit["document"]
    full = search(http, bob, q="expired certificate", content_mode="full")["data"][0]
    assert full["snippet"] is None and "expired certificate" in full["document"]["content"]
    none = search(http, bob, q="expired certificate", content_mode="none")["data"][0]
    assert none["snippet"] is None and "content" not in none["document"]


def test_snippets_are_capped(http, alice, bob, corpus):
    eng = corpus["kubernetes.md"].namespace
    document_create(actor=alice.actor, namespace=eng, path="long.md", content=("quasar " * 600 + "\n") * 5)
    hit = search(http, bob, q="quasar", snippet_lines=20)["data"][0]
    assert len(hit["snippet"]["text"]) <= 1200 and hit["snippet"]["text"].endswith("…")


def test_empty_query_browses_newest_first(http, alice, bob, corpus):
    document_revise(actor=alice.actor, document_id=corpus["kubernetes.md"].pk, content="# Kubernetes\n\nupdated")
    body = search(http, bob, q="")
    assert body["total"] == 39  # readable: 7 public eng docs + 30 bulk pages + 2 in ops
    assert paths(body)[0] == "kubernetes.md"
    assert body["data"][0]["snippet"] is None


def test_filters_scope_the_search(http, bob, corpus):
    assert set(paths(search(http, bob, q="incident", namespace="ops"))) == {
        "incident/2026-01.md",
        "incident/2026-02.md",
    }
    assert paths(search(http, bob, q="incident", namespace="eng")) == []
    assert set(paths(search(http, bob, q="widget", path_prefix="/bulk/", limit=100))) == {
        f"bulk/page-{i:02d}.md" for i in range(30)
    }
    assert search(http, bob, q="widget", path_prefix="guides").get("total") == 0


def test_post_matches_get(http, bob, corpus):
    get = search(http, bob, q="certificate", limit=5)
    post = http.as_(bob).post("/kb/search", json={"q": "certificate", "limit": 5})
    assert post.status_code == 200 and post.json() == get


@pytest.mark.parametrize(
    "q",
    [
        '"unbalanced',
        "-",
        "OR",
        "a OR",
        "foo -",
        "NEAR(a b)",
        "col:value",
        "a AND b NOT c",
        "^start",
        "x*y*",
        "(((",
        "'; DROP TABLE knowledge_document; --",
        "c++",
        "!@#$%^&*()",
        "\\",
        "*",
        '""',
        "-(x)",
        "über straße",
    ],
)
def test_accidental_operator_text_never_errors(http, bob, corpus, q):
    response = http.as_(bob).get("/kb/search", params={"q": q})
    assert response.status_code == 200, response.text
    assert isinstance(response.json()["data"], list)


@pytest.mark.parametrize(
    "params, code",
    [
        ({"mode": "semantic", "q": "x"}, "semantic_unavailable"),
        ({"limit": 101}, "invalid"),
        ({"limit": 0}, "invalid"),
        ({"snippet_lines": 21}, "invalid"),
        ({"content_mode": "all"}, "invalid"),
        ({"offset": -1}, "invalid"),
        ({"q": "x" * 1001}, "invalid"),
    ],
)
def test_bad_search_parameters_are_400(http, bob, corpus, params, code):
    response = http.as_(bob).get("/kb/search", params=params)
    assert response.status_code == 400 and response.json()["code"] == code


def test_hybrid_without_semantic_falls_back_to_text_and_says_why(http, bob, corpus):
    response = http.as_(bob).get("/kb/search", params={"mode": "hybrid", "q": "zeppelin"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["mode"] == "hybrid" and body["effective_mode"] == "text"
    assert "disabled" in body["fallback_reason"] or "SQLite" in body["fallback_reason"]
    assert paths(body) == paths(search(http, bob, q="zeppelin"))


def test_search_needs_a_token(http, corpus):
    assert http.get("/kb/search", params={"q": "x"}).status_code == 401


def test_group_grants_widen_search(http, alice, bob, corpus, workspace):
    from workspaces.models import Group

    group = Group.objects.create(workspace=workspace, name="planners")
    group.members.add(bob.user)
    NamespaceACL.objects.create(namespace=corpus["roadmap.md"].namespace, group=group, permission="read")
    assert paths(search(http, bob, q="zeppelin")) == ["roadmap.md"]
