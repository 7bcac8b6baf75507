"""Tree shaping and mention helpers: pure functions first, then the selectors on the database."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge import navigation
from knowledge.navigation import ELLIPSIS, build_tree, markdown_link, relative_path
from knowledge.services import document_create, document_set_archived
from workspaces.services import namespace_create


def doc(path: str, **fields) -> SimpleNamespace:
    defaults = {"id": uuid.uuid5(uuid.NAMESPACE_URL, path), "title": path, "icon": "", "kind": "doc"}
    return SimpleNamespace(path=path, status="published", **{**defaults, **fields})


def paths(nodes: list[dict]) -> list[tuple[str, str]]:
    """(type, path) for every node, depth first, in output order."""
    out = []
    for node in nodes:
        out.append((node["type"], node["path"]))
        out.extend(paths(node.get("children", [])))
    return out


def folder(nodes: list[dict], name: str) -> dict:
    return next(node for node in nodes if node["type"] == "folder" and node["name"] == name)


# --- relative_path -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "prefix", "expected"),
    [
        ("a/b.md", "", "a/b.md"),
        ("guides/x.md", "guides", "x.md"),
        ("guides", "guides", ""),
        ("guidesx/x.md", "guides", None),
        ("Guides/x.md", "guides", None),
        ("other/guides/x.md", "guides", None),
        ("a/b/c.md", "a/b", "c.md"),
    ],
)
def test_relative_path(path, prefix, expected):
    assert relative_path(path, prefix) == expected


# --- build_tree ----------------------------------------------------------------------------


def test_folders_first_by_name_then_documents_by_path():
    tree = build_tree(
        [doc("z.md"), doc("beta/one.md"), doc("a.md"), doc("alpha/two.md"), doc("alpha/one.md")],
        namespace="eng",
    )
    assert [(n["type"], n["path"]) for n in tree] == [
        ("folder", "alpha"),
        ("folder", "beta"),
        ("doc", "a.md"),
        ("doc", "z.md"),
    ]
    assert [c["path"] for c in folder(tree, "alpha")["children"]] == ["alpha/one.md", "alpha/two.md"]


def test_document_node_shape_has_no_content_or_metadata():
    document = doc("guides/setup.md", title="Setup", icon="🚀", kind="guide")
    (guides,) = build_tree([document], namespace="eng")
    (node,) = guides["children"]
    assert node == {
        "type": "doc",
        "icon": "🚀",
        "title": "Setup",
        "kind": "guide",
        "path": "guides/setup.md",
        "uri": "agor://kb/eng/guides/setup.md",
        "reference_uri": f"agor://kb/document/{document.id}",
        "status": "published",
    }
    assert build_tree([doc("x.md")], namespace="eng")[0]["icon"] is None
    assert set(guides) == {"type", "name", "path", "document_count", "children"}


def test_document_counts_include_descendants():
    tree = build_tree(
        [doc("a/1.md"), doc("a/b/2.md"), doc("a/b/3.md"), doc("a/b/c/4.md"), doc("x.md")],
        namespace="eng",
    )
    a = folder(tree, "a")
    b = folder(a["children"], "b")
    c = folder(b["children"], "c")
    assert (a["document_count"], b["document_count"], c["document_count"]) == (4, 3, 1)


def test_documents_deeper_than_depth_are_grouped_under_ellipsis():
    documents = [doc("a/1.md"), doc("a/b/2.md"), doc("a/b/c/3.md"), doc("a/b/c/d/e/4.md"), doc("top.md")]
    tree = build_tree(documents, namespace="eng", depth=1)
    assert paths(tree) == [
        ("folder", "a"),
        ("folder", f"a/{ELLIPSIS}"),
        ("doc", "a/b/2.md"),
        ("doc", "a/b/c/3.md"),
        ("doc", "a/b/c/d/e/4.md"),
        ("doc", "a/1.md"),
        ("doc", "top.md"),
    ]
    a = folder(tree, "a")
    hidden = folder(a["children"], ELLIPSIS)
    assert a["document_count"] == 4 and hidden["document_count"] == 3
    assert hidden["name"] == "…"

    tree = build_tree(documents, namespace="eng", depth=2)
    b = folder(folder(tree, "a")["children"], "b")
    assert [(n["type"], n["path"]) for n in b["children"]] == [("folder", f"a/b/{ELLIPSIS}"), ("doc", "a/b/2.md")]
    assert folder(b["children"], ELLIPSIS)["document_count"] == 2

    # Deep enough: no pseudo-folder at all.
    assert ELLIPSIS not in str(paths(build_tree(documents, namespace="eng", depth=10)))


def test_prefix_paths_and_depth_are_relative_to_the_prefix():
    documents = [doc("guides"), doc("guides/intro.md"), doc("guides/ops/k8s/deep.md"), doc("guidesx/no.md")]
    tree = build_tree(documents, namespace="eng", prefix="guides", depth=1)
    assert paths(tree) == [
        ("folder", "guides/ops"),
        ("folder", f"guides/ops/{ELLIPSIS}"),
        ("doc", "guides/ops/k8s/deep.md"),
        ("doc", "guides"),  # the document at the prefix itself sits at the root
        ("doc", "guides/intro.md"),
    ]
    assert folder(tree, "ops")["name"] == "ops"


def test_documents_outside_the_prefix_are_ignored_and_empty_input_is_empty():
    assert build_tree([doc("Guides/x.md"), doc("other.md")], namespace="eng", prefix="guides") == []
    assert build_tree([], namespace="eng") == []


def test_a_real_folder_named_ellipsis_is_not_confused_with_the_pseudo_folder():
    tree = build_tree([doc("…/real.md"), doc("a/b/deep.md")], namespace="eng", depth=1)
    assert paths(tree) == [
        ("folder", "a"),
        ("folder", "a/…"),
        ("doc", "a/b/deep.md"),
        ("folder", "…"),
        ("doc", "…/real.md"),
    ]


def test_depth_below_one_is_refused():
    with pytest.raises(ValueError):
        build_tree([doc("a.md")], namespace="eng", depth=0)


# --- markdown_link -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "label"),
    [
        ("Setup", "Setup"),
        ("A [b] c", r"A \[b\] c"),
        ("back\\slash]", r"back\\slash\]"),
        ("  ", "Untitled"),
        (None, "Untitled"),
        ("two\nlines", "two lines"),
    ],
)
def test_markdown_link_escapes_the_label(title, label):
    document_id = uuid.uuid4()
    assert markdown_link(title, document_id) == f"[{label}](agor://kb/document/{document_id})"


# --- selectors on the database -------------------------------------------------------------


@pytest.fixture
def eng(alice):
    return namespace_create(actor=alice.actor, slug="eng", others_can="read")


@pytest.mark.django_db
def test_tree_prefix_is_case_sensitive_on_every_database(alice, eng):
    for path in ("guides/a.md", "Guides/b.md", "guides", "guidesx/c.md"):
        document_create(actor=alice.actor, namespace=eng, path=path, content="x")
    result = navigation.namespace_tree(actor=alice.actor, namespace="eng", path_prefix="/guides//")
    assert result["path_prefix"] == "guides" and result["total"] == 2
    assert paths(result["tree"]) == [("doc", "guides"), ("doc", "guides/a.md")]


@pytest.mark.django_db
def test_tree_query_loads_no_content_metadata_or_versions(alice, eng):
    document_create(actor=alice.actor, namespace=eng, path="a/b.md", content="secret body", metadata={"k": "v"})
    actor = alice.actor
    with CaptureQueriesContext(connection) as captured:
        result = navigation.namespace_tree(actor=actor, namespace="eng")
    assert result["count"] == 1
    document_sql = [q["sql"] for q in captured if "knowledge_document" in q["sql"]]
    assert document_sql, [q["sql"] for q in captured]
    for sql in document_sql:
        assert "knowledge_documentversion" not in sql
        assert '"metadata"' not in sql and '"content"' not in sql


@pytest.mark.django_db
def test_mention_ranking_and_literal_wildcards(alice, eng):
    def make(path: str, title: str) -> None:
        document_create(actor=alice.actor, namespace=eng, path=path, content="body", title=title)

    make("n/1.md", "Cluster setup")
    make("setup/notes.md", "Notes")
    make("n/2.md", "Setup guide")
    make("n/3.md", "setup")
    make("ops/old-setup.md", "Old")
    make("n/4.md", "Unrelated")
    make("n/5.md", "100% done")
    make("n/6.md", "1000 done")
    make("n/7.md", "a_b")
    make("n/8.md", "axb")
    titles = [d.title for d in navigation.document_mentions(actor=alice.actor, q="SETUP")]
    assert titles == ["setup", "Setup guide", "Notes", "Cluster setup", "Old"]
    assert [d.title for d in navigation.document_mentions(actor=alice.actor, q="100%")] == ["100% done"]
    assert [d.title for d in navigation.document_mentions(actor=alice.actor, q="a_b")] == ["a_b"]
    assert [d.title for d in navigation.document_mentions(actor=alice.actor, q="setup", limit=2)] == [
        "setup",
        "Setup guide",
    ]


@pytest.mark.django_db
def test_mentions_skip_archived_documents(alice, eng):
    keep = document_create(actor=alice.actor, namespace=eng, path="plan-a.md", content="x", title="Plan A")
    gone = document_create(actor=alice.actor, namespace=eng, path="plan-b.md", content="x", title="Plan B")
    document_set_archived(actor=alice.actor, document_id=gone.pk, archived=True)
    assert [d.pk for d in navigation.document_mentions(actor=alice.actor, q="plan")] == [keep.pk]
    assert [d.pk for d in navigation.document_mentions(actor=alice.actor, q="")] == [keep.pk]
