"""The transfer protocol over HTTP: authorization, paging, checksums, receipts, limits, sanitized 400s."""

from __future__ import annotations

import hashlib
import threading
import uuid

import httpx
import pytest
from django.db import connection

from knowledge.models import Document, DocumentVersion
from knowledge.services import document_create
from transfer import format as fmt
from transfer import services
from transfer.models import ImportReceipt, NamespaceImport
from workspaces.services import namespace_acl_replace, namespace_create

pytestmark = pytest.mark.django_db(transaction=True)

BUNDLE = "b" * 64


@pytest.fixture
def ns(admin):
    namespace = namespace_create(actor=admin.actor, slug="src")
    for index in range(7):
        document_create(actor=admin.actor, namespace=namespace, path=f"d{index}.md", content=f"# Doc {index}\n")
    return namespace


def item(key: str, path: str, content: str, **extra) -> dict:
    encoded = content.encode()
    return {
        "key": key,
        "source_id": str(uuid.uuid4()),
        "path": path,
        "title": path,
        "icon": None,
        "kind": "doc",
        "status": "published",
        "frontmatter": None,
        "provenance": {"created_by": "someone-else", "visibility": "public"},
        "sha256": hashlib.sha256(encoded).hexdigest(),
        "bytes": len(encoded),
        "content": content,
        **extra,
    }


def namespace_body(slug: str = "dest", **extra) -> dict:
    return {"bundle": BUNDLE, "slug": slug, "display_name": "Dest", "documents": 2, "request_bytes": 1000, **extra}


def test_inventory_pages_by_cursor_without_bodies(http, admin, ns):
    client = http.as_(admin)
    first = client.get("/kb/transfers/inventory", params={"namespace": "src", "limit": 3}).json()
    assert first["total"] == 7 and len(first["entries"]) == 3 and first["next_cursor"]
    assert "content" not in first["entries"][0] and len(first["entries"][0]["sha256"]) == 64
    ids = [e["document_id"] for e in first["entries"]]
    cursor = first["next_cursor"]
    while cursor:
        page = client.get("/kb/transfers/inventory", params={"namespace": "src", "limit": 3, "cursor": cursor}).json()
        ids += [e["document_id"] for e in page["entries"]]
        cursor = page["next_cursor"]
    assert ids == sorted(ids) and len(set(ids)) == 7


def test_export_needs_an_admin_and_invisible_is_404(http, alice, admin, ns):
    hidden = http.as_(alice).get("/kb/transfers/inventory", params={"namespace": "src"})
    missing = http.as_(alice).get("/kb/transfers/inventory", params={"namespace": "nope"})
    assert hidden.status_code == missing.status_code == 404 and hidden.json() == missing.json()
    namespace_acl_replace(
        actor=admin.actor,
        namespace=ns,
        entries=[{"subject_type": "user", "subject": "alice", "permission": "own"}],
    )
    denied = http.as_(alice).get("/kb/transfers/inventory", params={"namespace": "src"})
    assert denied.status_code == 403 and denied.json()["code"] == "permission_denied"
    version = Document.objects.filter(namespace=ns).first().current_version
    body = {"namespace": "src", "items": [{"document_id": str(version.document_id), "version_id": str(version.pk)}]}
    assert http.as_(alice).post("/kb/transfers/bodies", json=body).status_code == 403
    assert http.get("/kb/transfers/inventory", params={"namespace": "src"}).status_code == 401


def test_bodies_are_verified_against_stored_checksums(http, admin, ns):
    doc = Document.objects.filter(namespace=ns, path="d1.md").get()
    other = Document.objects.filter(namespace=ns, path="d2.md").get()
    with connection.cursor() as cursor:  # corrupt one stored body behind the model's back
        cursor.execute(
            "UPDATE knowledge_documentversion SET content = %s WHERE id = %s",
            ["tampered", other.current_version_id.hex if connection.vendor == "sqlite" else other.current_version_id],
        )
    items = [
        {"document_id": str(doc.pk), "version_id": str(doc.current_version_id)},
        {"document_id": str(other.pk), "version_id": str(other.current_version_id)},
        {"document_id": str(doc.pk), "version_id": str(uuid.uuid4())},
    ]
    answer = http.as_(admin).post("/kb/transfers/bodies", json={"namespace": "src", "items": items}).json()["items"]
    assert [a["status"] for a in answer] == ["ok", "checksum_mismatch", "missing"]
    assert answer[0]["content"] == "# Doc 1\n" and "content" not in answer[1]


def test_bodies_answer_stays_bounded(admin, ns, monkeypatch):
    monkeypatch.setattr(services, "RESPONSE_BUDGET_BYTES", 10)
    docs = list(Document.objects.filter(namespace=ns).order_by("path")[:3])
    items = [{"document_id": d.pk, "version_id": d.current_version_id} for d in docs]
    statuses = [r["status"] for r in services.bodies(actor=admin.actor, slug="src", items=items)]
    assert statuses == ["ok", "deferred", "deferred"]


def test_namespace_create_is_private_owned_and_resumable(http, alice, bob):
    client = http.as_(alice)
    created = client.post("/kb/transfers/namespace", json=namespace_body())
    assert created.status_code == 201 and created.json()["created"] is True
    record = NamespaceImport.objects.get()
    namespace = record.namespace
    assert (
        namespace.owner == alice.user and namespace.visibility_default == "private" and namespace.others_can == "none"
    )
    again = client.post("/kb/transfers/namespace", json=namespace_body())
    assert again.status_code == 409 and again.json()["code"] == "import_exists"
    resumed = client.post("/kb/transfers/namespace", json=namespace_body(resume=True))
    assert resumed.status_code == 200 and resumed.json()["created"] is False
    changed = client.post("/kb/transfers/namespace", json=namespace_body(resume=True, documents=3))
    assert changed.status_code == 409 and changed.json()["code"] == "import_plan_changed"
    other_bundle = client.post("/kb/transfers/namespace", json=namespace_body(resume=True, bundle="c" * 64))
    assert other_bundle.status_code == 409 and other_bundle.json()["code"] == "namespace_exists"
    other_user = http.as_(bob).post("/kb/transfers/namespace", json=namespace_body(resume=True))
    assert other_user.status_code == 409 and other_user.json()["code"] == "namespace_exists"
    receipts = http.as_(bob).get("/kb/transfers/receipts", params={"namespace": "dest", "bundle": BUNDLE})
    assert receipts.status_code == 409
    too_big = client.post("/kb/transfers/namespace", json=namespace_body(slug="big", documents=10_001))
    assert too_big.status_code == 413 and too_big.json()["code"] == "transfer_limit"


def test_document_create_with_receipt_is_idempotent_and_guards_changes(http, alice):
    client = http.as_(alice)
    assert client.post("/kb/transfers/namespace", json=namespace_body()).status_code == 201
    docs = [item("d000001", "a.md", "# A\n"), item("d000002", "b.md", "# B\n", status="draft", icon="🚀")]
    request = {"bundle": BUNDLE, "namespace": "dest", "documents": docs}
    first = client.post("/kb/transfers/documents", json=request).json()["results"]
    assert [r["status"] for r in first] == ["created", "created"]
    retry = client.post("/kb/transfers/documents", json=request).json()["results"]  # a lost acknowledgement
    assert [r["status"] for r in retry] == ["skipped", "skipped"]
    assert DocumentVersion.objects.filter(document__namespace__slug="dest").count() == 2
    imported = Document.objects.get(namespace__slug="dest", path="b.md")
    assert imported.visibility == "private" and imported.edit_policy == "owner" and imported.status == "draft"
    assert imported.created_by == alice.user
    assert imported.metadata["knowledge_import"]["provenance"]["created_by"] == "someone-else"
    status = client.get("/kb/transfers/receipts", params={"namespace": "dest", "bundle": BUNDLE}).json()
    assert status["total"] == 2 and all(r["unchanged"] for r in status["receipts"])

    Document.objects.filter(pk=imported.pk).update(path="renamed.md")
    conflict = client.post("/kb/transfers/documents", json=request).json()["results"]
    assert conflict[1] == {"key": "d000002", "status": "error", "http_status": 409, "code": "imported_document_changed"}
    assert Document.objects.filter(namespace__slug="dest").count() == 2
    status = client.get("/kb/transfers/receipts", params={"namespace": "dest", "bundle": BUNDLE}).json()
    assert [r["unchanged"] for r in status["receipts"]] == [True, False]


def test_per_item_failures_do_not_block_other_documents(http, alice):
    client = http.as_(alice)
    client.post("/kb/transfers/namespace", json=namespace_body())
    bad = item("d000001", "a.md", "# A\n")
    bad["sha256"] = "0" * 64
    same_path = item("d000003", "b.md", "# another B\n")
    docs = [bad, item("d000002", "b.md", "# B\n"), same_path]
    results = client.post("/kb/transfers/documents", json={"bundle": BUNDLE, "namespace": "dest", "documents": docs})
    assert results.status_code == 200
    assert [(r["status"], r.get("code")) for r in results.json()["results"]] == [
        ("error", "checksum_mismatch"),
        ("created", None),
        ("error", "path_taken"),
    ]
    assert ImportReceipt.objects.count() == 1 and Document.objects.filter(namespace__slug="dest").count() == 1


def test_namespace_wide_limits_stop_the_request(http, alice, monkeypatch):
    client = http.as_(alice)
    client.post("/kb/transfers/namespace", json=namespace_body())
    monkeypatch.setattr(fmt, "MAX_TOTAL_REQUEST_BYTES", 600)
    docs = [item("d000001", "a.md", "x" * 100), item("d000002", "b.md", "y" * 100)]
    answer = client.post("/kb/transfers/documents", json={"bundle": BUNDLE, "namespace": "dest", "documents": docs})
    assert answer.status_code == 413 and answer.json()["code"] == "transfer_limit"
    assert ImportReceipt.objects.count() == Document.objects.filter(namespace__slug="dest").count() == 1


def test_destination_changes_after_creation_are_refused(http, alice, bob):
    client = http.as_(alice)
    client.post("/kb/transfers/namespace", json=namespace_body())
    namespace = NamespaceImport.objects.get().namespace
    namespace_acl_replace(
        actor=alice.actor,
        namespace=namespace,
        entries=[
            {"subject_type": "user", "subject": "alice", "permission": "own"},
            {"subject_type": "user", "subject": "bob", "permission": "read"},
        ],
    )
    request = {"bundle": BUNDLE, "namespace": "dest", "documents": [item("d000001", "a.md", "# A\n")]}
    refused = client.post("/kb/transfers/documents", json=request)
    assert refused.status_code == 409 and refused.json()["code"] == "import_destination_changed"
    assert Document.objects.filter(namespace=namespace).count() == 0


def test_reconcile_counts_resolved_references(http, alice):
    client = http.as_(alice)
    client.post("/kb/transfers/namespace", json=namespace_body())
    docs = [
        item("d000001", "a.md", "[b](agor://kb/dest/b.md) [gone](agor://kb/dest/zzz.md)"),
        item("d000002", "b.md", "# B\n"),
    ]
    client.post("/kb/transfers/documents", json={"bundle": BUNDLE, "namespace": "dest", "documents": docs})
    body = {"bundle": BUNDLE, "namespace": "dest", "keys": ["d000001", "d000002", "d000009"]}
    results = client.post("/kb/transfers/reconcile", json=body).json()["results"]
    assert results[0] == {"key": "d000001", "status": "reconciled", "references": 2, "resolved": 1}
    assert results[2]["status"] == "error" and results[2]["code"] == "not_found"
    assert ImportReceipt.objects.filter(reconciled=True).count() == 2


@pytest.mark.parametrize(
    "body",
    [
        {"bundle": "x", "namespace": "dest", "documents": []},
        {"bundle": BUNDLE, "namespace": "dest", "documents": [{**item("d000001", "a.md", "x"), "kind": "SECRET-KIND"}]},
        {"bundle": BUNDLE, "namespace": "dest", "documents": [item("d000001", "../SECRET.md", "x")]},
        {"bundle": BUNDLE, "namespace": "dest", "documents": [item("d000001", "a.md", "x")], "SECRET_KEY": 1},
    ],
)
def test_invalid_requests_name_fields_but_never_echo_values(http, alice, body):
    answer = http.as_(alice).post("/kb/transfers/documents", json=body)
    assert answer.status_code == 400 and answer.json()["code"] == "invalid"
    assert "Invalid Knowledge transfer request (POST /kb/transfers/documents)" in answer.json()["detail"]
    assert "SECRET" not in answer.text


def _graph_snapshot() -> set[tuple]:
    """References edges and content links by document path (what a per-document sync leaves)."""
    from graph.models import ContentLink, GraphEdge

    edges = {
        ("edge", edge.source.document.path, edge.target.document.path, edge.archived)
        for edge in GraphEdge.objects.filter(edge_type="references").select_related(
            "source__document", "target__document"
        )
    }
    links = {
        ("link", link.source.document.path, link.ordinal, link.path, link.target_document_id is not None)
        for link in ContentLink.objects.select_related("source__document")
    }
    return edges | links


LINKED = [
    ("d000001", "a.md", "[b](agor://kb/dest/b.md) [c](agor://kb/dest/c.md) [gone](agor://kb/dest/zzz.md)"),
    ("d000002", "b.md", "[a](agor://kb/dest/a.md)\n"),
    ("d000003", "c.md", "# C\n\n[b](agor://kb/dest/b.md)\n"),
]


def test_import_defers_reference_sync_to_reconcile_and_matches_a_full_sync(http, alice):
    from graph.models import GraphEdge
    from graph.services import links_reconcile

    client = http.as_(alice)
    client.post("/kb/transfers/namespace", json=namespace_body(documents=3))
    docs = [item(key, path, content) for key, path, content in LINKED]
    client.post("/kb/transfers/documents", json={"bundle": BUNDLE, "namespace": "dest", "documents": docs})
    assert not GraphEdge.objects.filter(edge_type="references").exists()

    body = {"bundle": BUNDLE, "namespace": "dest", "keys": [key for key, _, _ in LINKED]}
    assert all(r["status"] == "reconciled" for r in client.post("/kb/transfers/reconcile", json=body).json()["results"])
    after_import = _graph_snapshot()
    assert ("edge", "a.md", "b.md", False) in after_import and ("edge", "b.md", "a.md", False) in after_import
    assert ("edge", "c.md", "b.md", False) in after_import and ("edge", "a.md", "c.md", False) in after_import

    links_reconcile(namespace="dest")
    assert _graph_snapshot() == after_import


def test_reconcile_hands_its_reference_sync_over_once_per_request(http, alice, monkeypatch):
    from graph import hooks as graph_hooks

    handed_over: list[list[tuple]] = []
    real = graph_hooks.on_content_writes
    monkeypatch.setattr(graph_hooks, "on_content_writes", lambda writes: (handed_over.append(writes), real(writes)))
    client = http.as_(alice)
    client.post("/kb/transfers/namespace", json=namespace_body(documents=3))
    docs = [item(key, path, content) for key, path, content in LINKED]
    created = client.post("/kb/transfers/documents", json={"bundle": BUNDLE, "namespace": "dest", "documents": docs})
    ids = {result["document_id"] for result in created.json()["results"]}
    keys = [key for key, _, _ in LINKED]
    body = {"bundle": BUNDLE, "namespace": "dest", "keys": [*keys, "d000009"]}
    results = client.post("/kb/transfers/reconcile", json=body).json()["results"]
    assert [(r["key"], r["status"], r.get("references"), r.get("resolved")) for r in results] == [
        ("d000001", "reconciled", 3, 2),
        ("d000002", "reconciled", 1, 1),
        ("d000003", "reconciled", 1, 1),
        ("d000009", "error", None, None),
    ]
    assert len(handed_over) == 1 and {str(document_id) for document_id, _ in handed_over[0]} == ids
    assert len({entry for entry in _graph_snapshot() if entry[0] == "edge"}) == 4
    # Reconciled once: a repeat has nothing new to sync and hands nothing over.
    client.post("/kb/transfers/reconcile", json={"bundle": BUNDLE, "namespace": "dest", "keys": keys})
    assert len(handed_over) == 1


def test_reconcile_resumed_after_a_partial_run_links_every_document(http, alice):
    client = http.as_(alice)
    client.post("/kb/transfers/namespace", json=namespace_body(documents=3))
    docs = [item(key, path, content) for key, path, content in LINKED]
    # The first batch lands, then the run dies; the resumed run skips it and sends the rest.
    client.post("/kb/transfers/documents", json={"bundle": BUNDLE, "namespace": "dest", "documents": docs[:1]})
    client.post("/kb/transfers/reconcile", json={"bundle": BUNDLE, "namespace": "dest", "keys": ["d000001"]})
    answer = client.post("/kb/transfers/documents", json={"bundle": BUNDLE, "namespace": "dest", "documents": docs})
    assert [r["status"] for r in answer.json()["results"]] == ["skipped", "created", "created"]
    keys = ["d000002", "d000003"]
    client.post("/kb/transfers/reconcile", json={"bundle": BUNDLE, "namespace": "dest", "keys": keys})
    edges = {entry for entry in _graph_snapshot() if entry[0] == "edge"}
    assert edges == {
        ("edge", "a.md", "b.md", False),
        ("edge", "a.md", "c.md", False),
        ("edge", "b.md", "a.md", False),
        ("edge", "c.md", "b.md", False),
    }
    assert DocumentVersion.objects.filter(document__namespace__slug="dest").count() == 3


def test_parallel_import_requests_never_exceed_the_document_limit(http, alice, live_server, monkeypatch):
    """Documents are created side by side and counted last; the count still stops at the limit."""
    http.as_(alice).post("/kb/transfers/namespace", json=namespace_body())
    monkeypatch.setattr(fmt, "MAX_DOCUMENTS", 5)
    senders = 4
    barrier = threading.Barrier(senders)
    codes: list[int] = []

    def send(sender: int) -> None:
        docs = [item(f"d{sender}{n:05d}", f"s{sender}/n{n}.md", f"# {sender} {n}\n") for n in range(3)]
        with httpx.Client(base_url=live_server.url, headers=alice.headers, timeout=60) as client:
            barrier.wait()
            request = {"bundle": BUNDLE, "namespace": "dest", "documents": docs}
            answer = client.post("/kb/transfers/documents", json=request)
        codes.append(answer.status_code)

    threads = [threading.Thread(target=send, args=(sender,)) for sender in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 413 in codes and set(codes) <= {200, 413}
    record = NamespaceImport.objects.get()
    assert record.imported_documents == 5
    assert ImportReceipt.objects.count() == Document.objects.filter(namespace__slug="dest").count() == 5
