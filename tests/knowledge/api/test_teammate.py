"""Teammate memory over HTTP: home namespace on first use, append with dedup, config."""

from __future__ import annotations

import threading

import httpx
import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_context_creates_a_closed_home_namespace_on_first_use(http, alice, bob):
    body = http.as_(alice).get("/kb/teammate").json()
    assert body["namespace"] == "teammate-alice" and body["memory"] == []
    assert body["config"]["memory_path_template"] == "memory/{{YYYY-MM-DD}}.md"
    ns = http.as_(alice).get("/kb/namespaces/teammate-alice").json()
    assert ns["owner"] == "alice" and ns["others_can"] == "none"
    assert http.as_(bob).get("/kb/namespaces/teammate-alice").status_code == 404
    assert http.as_(alice).get("/kb/teammate").json()["namespace"] == "teammate-alice"  # reused


def test_append_writes_delimited_entries_and_dedups(http, alice, bob):
    client = http.as_(alice)
    first = client.post(
        "/kb/teammate/memory",
        json={
            "bullets": "- prefers short answers\n* uses vim",
            "category": "preference",
            "tags": ["style"],
            "date": "2026-12-01",
            "idempotency_key": "k1",
        },
    )
    assert first.status_code == 200, first.text
    result = first.json()
    assert result["path"] == "memory/2026-12-01.md"
    assert [a["text"] for a in result["appended"]] == ["prefers short answers", "uses vim"]
    assert not any(a["deduped"] for a in result["appended"])
    again = client.post(
        "/kb/teammate/memory",
        json={
            "bullets": ["prefers short answers", "uses vim"],
            "category": "preference",
            "date": "2026-12-01",
            "idempotency_key": "k1",
        },
    ).json()
    assert all(a["deduped"] for a in again["appended"])
    doc = client.get(f"/kb/documents/{result['document_id']}").json()
    assert doc["current_version"]["number"] == 1
    assert doc["visibility"] == "private" and doc["edit_policy"] == "owner" and doc["kind"] == "memory"
    content = doc["content"]
    assert content.startswith("# 2026-12-01\n")
    assert content.count("<!-- agor-memory-entry id=") == 2 and content.count("<!-- /agor-memory-entry -->") == 2
    assert "preference: prefers short answers #style" in content
    more = client.post("/kb/teammate/memory", json={"bullets": "ships on fridays", "date": "2026-12-01"}).json()
    assert not more["appended"][0]["deduped"]
    assert client.get(f"/kb/documents/{result['document_id']}").json()["current_version"]["number"] == 2
    context = client.get("/kb/teammate").json()
    assert context["memory"][0]["path"] == "memory/2026-12-01.md"
    assert "ships on fridays" in context["memory"][0]["content"]
    assert http.as_(bob).get(f"/kb/documents/{result['document_id']}").status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {"bullets": ""},
        {"bullets": "  \n - "},
        {"bullets": 5},
        {"bullets": ["ok", 3]},
        {"bullets": "x", "category": "gossip"},
        {"bullets": "x", "date": "yesterday"},
    ],
)
def test_bad_append_input_is_400(http, alice, body):
    response = http.as_(alice).post("/kb/teammate/memory", json=body)
    assert response.status_code == 400 and response.json()["code"] == "invalid"


def test_concurrent_appends_all_land(http, alice, live_server):
    http.as_(alice).get("/kb/teammate")
    barrier = threading.Barrier(4)
    codes = []

    def append(i: int) -> None:
        with httpx.Client(base_url=live_server.url, headers=alice.headers, timeout=60) as client:
            barrier.wait()
            codes.append(
                client.post("/kb/teammate/memory", json={"bullets": f"fact {i}", "date": "2026-12-02"}).status_code
            )

    threads = [threading.Thread(target=append, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes.count(200) >= 3  # three attempts each; four writers may exhaust one
    doc = http.as_(alice).get(
        "/kb/documents/by-path", params={"namespace": "teammate-alice", "path": "memory/2026-12-02.md"}
    )
    content = doc.json()["content"]
    assert sum(f"fact {i}" in content for i in range(4)) == codes.count(200)


def test_config_is_self_service_and_admins_manage_others(http, alice, bob, make_member):
    admin = make_member("admin", username="root")
    changed = http.as_(alice).patch("/kb/teammate/config", json={"memory_visibility": "public"})
    assert changed.status_code == 200 and changed.json()["memory_visibility"] == "public"
    assert (
        http.as_(bob).patch("/kb/teammate/config?user=alice", json={"memory_visibility": "private"}).status_code == 403
    )
    by_admin = http.as_(admin).patch(
        "/kb/teammate/config?user=alice", json={"memory_path_template": "notes/{{YYYY-MM-DD}}.md"}
    )
    assert by_admin.status_code == 200 and by_admin.json()["memory_path_template"] == "notes/{{YYYY-MM-DD}}.md"
    bad = http.as_(alice).patch("/kb/teammate/config", json={"memory_path_template": "../escape.md"})
    assert bad.status_code == 400
    result = http.as_(alice).post("/kb/teammate/memory", json={"bullets": "x", "date": "2026-01-02"}).json()
    assert result["path"] == "notes/2026-01-02.md"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"grants": [{"namespace": "Bad Slug", "access": "read"}]}, "grants[0]"),
        ({"grants": [{"namespace": "eng", "access": "own"}]}, "grants[0]"),
        ({"grants": [{"namespace": "eng", "access": "read", "extra": 1}]}, "grants[0]"),
        ({"memory_edit_policy": "nobody"}, "memory_edit_policy"),
        ({"memory_path_template": "memory/today.md"}, "memory_path_template"),
    ],
)
def test_bad_config_values_are_400_and_change_nothing(http, alice, body, field):
    before = http.as_(alice).get("/kb/teammate/config").json()
    response = http.as_(alice).patch("/kb/teammate/config", json=body)
    assert response.status_code == 400, response.text
    assert field in response.text
    assert http.as_(alice).get("/kb/teammate/config").json() == before


def test_grants_are_normalised_one_per_namespace(http, alice):
    grants = [{"namespace": "eng", "access": "read"}, {"namespace": "ops"}, {"namespace": "eng", "access": "write"}]
    saved = http.as_(alice).patch("/kb/teammate/config", json={"grants": grants}).json()
    assert saved["grants"] == [{"namespace": "eng", "access": "write"}, {"namespace": "ops", "access": "read"}]
