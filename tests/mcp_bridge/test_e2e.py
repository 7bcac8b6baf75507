"""The bridge end to end: spawned over stdio by the SDK's own client, against a live server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from knowledge.services import document_create
from tests.mcp_bridge import run_async
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


class Session:
    """Collects results of tool calls made through one stdio bridge process."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def ok(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.session.call_tool(name, args)
        assert not result.is_error, (name, result.content[0].text if result.content else result)
        return result.structured_content

    async def fails(self, name: str, args: dict[str, Any]) -> str:
        result = await self.session.call_tool(name, args)
        assert result.is_error, (name, result.structured_content)
        return result.content[0].text


def run_bridge(live_server: Any, token: str, worktree: Path, scenario) -> float:
    """Start `python -m mcp_bridge`, run the scenario, return the start-up time in seconds."""
    env = {**os.environ, "AGOR_URL": live_server.url, "AGOR_TOKEN": token, "AGOR_WORKTREE": str(worktree)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_bridge"], env=env, cwd=str(ROOT))

    async def main() -> float:
        started = time.perf_counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            startup = time.perf_counter() - started
            await scenario(Session(session))
            return startup

    return run_async(main)


def test_read_write_archive_and_memory_tools(live_server, alice, bob, tmp_path):
    namespace = namespace_create(actor=alice.actor, slug="eng", others_can="read")
    private = namespace_create(actor=bob.actor, slug="bobs")
    secret = document_create(actor=bob.actor, namespace=private, path="s.md", content="# Secret\n")
    doc = document_create(
        actor=alice.actor, namespace=namespace, path="guides/setup.md", content="# Setup\n\nInstall the cli.\n"
    )

    async def scenario(s: Session) -> None:
        tools = await s.session.list_tools()
        assert len(tools.tools) == 19
        listed = await s.ok("agor_kb_namespaces_list", {})
        assert [n["slug"] for n in listed["data"]] == ["eng"] and listed["hasMore"] is False
        assert (await s.ok("agor_kb_namespaces_list", {"slug": "bobs"}))["total"] == 0
        put = await s.ok("agor_kb_namespace_put", {"slug": "notes", "displayName": "Notes"})
        assert put["created"] is True and put["namespace"]["owner"] == "alice"
        again = await s.ok("agor_kb_namespace_put", {"slug": "notes", "description": "d"})
        assert again["created"] is False and again["namespace"]["description"] == "d"
        assert "code invalid" in await s.fails("agor_kb_namespace_put", {"slug": "Bad Slug"})

        hits = await s.ok("agor_kb_search", {"query": "install cli"})
        assert hits["data"][0]["document"]["reference_uri"] == f"agor://kb/document/{doc.pk}"
        assert "Install the cli" in hits["data"][0]["snippet"]["text"]
        browse = await s.ok("agor_kb_search", {"query": ""})
        assert browse["data"][0]["snippet"] is None
        assert "semantic" in (await s.fails("agor_kb_search", {"query": "x", "mode": "semantic"})).lower()

        got = await s.ok("agor_kb_get", {"uri": f"agor://kb/document/{str(doc.pk).upper()}"})
        assert got["document"]["content"].startswith("# Setup")
        by_path = await s.ok("agor_kb_get", {"uri": "agor://kb/eng/guides/setup.md"})
        assert by_path["document"]["id"] == str(doc.pk)
        assert "Not found" in await s.fails("agor_kb_get", {"documentId": str(secret.pk)})

        # materialize -> edit the file -> publish; then a stale sidecar conflicts.
        mat = await s.ok("agor_kb_materialize", {"documentId": str(doc.pk)})
        file = tmp_path / mat["subpath"]
        assert file.read_text() == "# Setup\n\nInstall the cli.\n"
        file.write_text("# Setup\n\nInstall the cli, then log in.\n")
        dry = await s.ok("agor_kb_publish_from_worktree", {"subpath": mat["subpath"], "dryRun": True})
        assert "+Install the cli, then log in." in dry["diff"]
        published = await s.ok("agor_kb_publish_from_worktree", {"subpath": mat["subpath"]})
        assert published["document"]["current_version"]["number"] == 2
        sidecar = json.loads((tmp_path / mat["sidecarSubpath"]).read_text())
        assert sidecar["version_number"] == 2
        sidecar["version_number"] = 1
        (tmp_path / mat["sidecarSubpath"]).write_text(json.dumps(sidecar))
        file.write_text("# Setup\n\nconflicting edit\n")
        assert "conflict" in (await s.fails("agor_kb_publish_from_worktree", {"subpath": mat["subpath"]})).lower()
        assert "already exists" in await s.fails("agor_kb_materialize", {"documentId": str(doc.pk)})
        escape = await s.fails("agor_kb_materialize", {"documentId": str(doc.pk), "subpath": "../../etc/x.md"})
        assert "worktree" in escape
        assert not (tmp_path.parent.parent / "etc" / "x.md").exists()

        history = await s.ok("agor_kb_history", {"documentId": str(doc.pk)})
        assert [v["number"] for v in history["data"]] == [2, 1] and history["total"] == 2
        assert "Provide documentId" in await s.fails("agor_kb_history", {})

        # archive -> search no longer finds it -> restore
        archived = await s.ok("agor_kb_archive", {"documentId": str(doc.pk), "archived": True})
        assert archived["document"]["archived"] is True
        assert (await s.ok("agor_kb_search", {"query": "install cli"}))["total"] == 0
        assert (await s.ok("agor_kb_archive", {"documentId": str(doc.pk), "archived": True}))["changed"] is False
        await s.ok("agor_kb_archive", {"documentId": str(doc.pk), "archived": False})
        assert (await s.ok("agor_kb_search", {"query": "install cli"}))["total"] == 1
        stale = await s.fails("agor_kb_archive", {"documentId": str(doc.pk), "archived": True, "expectedVersion": 1})
        assert "expectedVersion=2" in stale

        too_many = await s.session.call_tool(
            "agor_kb_archive_bulk", {"archived": True, "targets": [{"documentId": str(doc.pk)}] * 51}
        )
        assert too_many.is_error
        bulk = await s.ok(
            "agor_kb_archive_bulk",
            {"archived": True, "targets": [{"documentId": str(doc.pk)}, {"documentId": str(secret.pk)}]},
        )
        assert [r["status"] for r in bulk["results"]] == ["archived", "error"]
        assert bulk["results"][1]["code"] == "not_found" and "Secret" not in json.dumps(bulk)

        # teammate memory
        context = await s.ok("agor_teammate_context", {})
        assert context["namespace"] == "teammate-alice"
        first = await s.ok(
            "agor_teammate_memory_append", {"bullets": "likes tea", "idempotencyKey": "k", "date": "2026-12-01"}
        )
        second = await s.ok(
            "agor_teammate_memory_append", {"bullets": "likes tea", "idempotencyKey": "k", "date": "2026-12-01"}
        )
        assert not first["appended"][0]["deduped"] and second["appended"][0]["deduped"]
        found = await s.ok("agor_teammate_memory_search", {"query": "tea"})
        assert found["total"] == 1 and found["data"][0]["document"]["path"] == "memory/2026-12-01.md"
        assert "No memory bullets" in await s.fails("agor_teammate_memory_append", {"bullets": " "})

    startup = run_bridge(live_server, alice.token, tmp_path, scenario)
    assert startup < 30


def test_rejected_token_gives_one_clear_error_per_tool(live_server, alice, tmp_path):
    async def scenario(s: Session) -> None:
        message = await s.fails("agor_kb_search", {"query": "x"})
        assert "rejected the token" in message
        assert "rejected the token" in await s.fails("agor_kb_namespaces_list", {})

    run_bridge(live_server, "kb_not-a-real-token", tmp_path, scenario)


STRUCTURED = "# Guide\n\nintro\n\n### Deep\n\nd\n\n## Step\n\none\n\n## Step\n\ntwo\n"


def test_structure_edit_graph_and_failure_of_every_other_tool(live_server, alice, bob, tmp_path):
    """Tools the first scenario does not cover, each with a success and a failure."""
    namespace = namespace_create(actor=alice.actor, slug="eng", others_can="read")
    private = namespace_create(actor=bob.actor, slug="bobs")
    secret = document_create(actor=bob.actor, namespace=private, path="s.md", content="# Secret\n")
    target = document_create(actor=alice.actor, namespace=namespace, path="ops/deploy.md", content="# Deploy\n")

    async def scenario(s: Session) -> None:
        assert "limit" in (await s.fails("agor_kb_namespaces_list", {"limit": 0})).lower()

        # put creates, put again with the right version revises, an edit with the stale one conflicts
        created = await s.ok("agor_kb_put", {"namespace": "eng", "path": "guides/guide.md", "content": STRUCTURED})
        assert created["created"] is True and created["document"]["current_version"]["number"] == 1
        doc_id = created["document"]["id"]
        assert created["document"]["reference_uri"] == f"agor://kb/document/{doc_id}"
        same = await s.ok("agor_kb_put", {"namespace": "eng", "path": "guides/guide.md", "content": STRUCTURED})
        assert same["changed"] is False and same["document"]["current_version"]["number"] == 1
        revised = await s.ok(
            "agor_kb_put",
            {"documentId": doc_id, "content": STRUCTURED + "\nmore\n", "expectedVersion": 1},
        )
        assert revised["document"]["current_version"]["number"] == 2
        missing = await s.fails("agor_kb_put", {"namespace": "eng", "path": "new.md"})
        assert "content" in missing.lower()

        tree = await s.ok("agor_kb_tree", {"namespace": "eng"})
        folders = {node["name"] for node in tree["tree"] if node["type"] == "folder"}
        assert folders == {"guides", "ops"} and tree["hasMore"] is False and tree["total"] == 2
        assert "Not found" in await s.fails("agor_kb_tree", {"namespace": "bobs"})

        # duplicate and skipped headings: refs count per level under the same parent
        outline = await s.ok("agor_kb_outline", {"uri": "agor://kb/eng/guides/guide.md"})
        refs = [(h["title"], h["section_ref"], h["start_line"], h["end_line"]) for h in outline["headings"]]
        assert refs == [
            ("Guide", "root.h1[1]", 1, 17),
            ("Deep", "root.h1[1].h3[1]", 5, 8),
            ("Step", "root.h1[1].h2[1]", 9, 12),
            ("Step", "root.h1[1].h2[2]", 13, 17),
        ]
        assert "Provide documentId" in await s.fails("agor_kb_outline", {})

        second = await s.ok(
            "agor_kb_get_range", {"documentId": doc_id, "sectionRef": "root.h1[1].h2[2]", "contextLines": 0}
        )
        assert second["range"]["content"].startswith("## Step\n\ntwo\n")
        by_heading = await s.ok(
            "agor_kb_get_range", {"documentId": doc_id, "headingPath": "Guide > Step", "occurrence": 2}
        )
        assert by_heading["range"]["start_line"] == 13
        assert "section" in (await s.fails("agor_kb_get_range", {"documentId": doc_id, "sectionRef": "root.h9[1]"}))

        # edits: a stale expectedVersion is a conflict that says how to retry; the right one makes version 3
        op = {"type": "replace_line_range", "startLine": 11, "endLine": 11, "replacement": "first"}
        op["expectedText"] = "one"
        stale = await s.fails("agor_kb_edit", {"documentId": doc_id, "ops": [op], "expectedVersion": 1})
        assert "now at version 2" in stale and "expectedVersion=2" in stale
        edited = await s.ok("agor_kb_edit", {"documentId": doc_id, "ops": [op], "expectedVersion": 2})
        assert edited["new_version"]["number"] == 3 and "+first" in edited["diff"]

        # explicit links and a walk of the graph
        link = {"sourceDocumentId": doc_id, "targetUri": "agor://kb/eng/ops/deploy.md", "edgeType": "depends_on"}
        linked = await s.ok("agor_kb_link", link)
        assert linked["created"] is True and linked["edge"]["target"]["document_id"] == str(target.pk)
        assert (await s.ok("agor_kb_link", link))["created"] is False
        unaddressed = await s.fails("agor_kb_link", {**link, "targetUri": "agor://kb/eng"})
        assert "Provide documentId" in unaddressed
        hidden = await s.fails("agor_kb_link", {**link, "targetUri": None, "targetDocumentId": str(secret.pk)})
        assert "Not found" in hidden and "Secret" not in hidden
        around = await s.ok("agor_kb_graph_neighbors", {"documentId": str(target.pk), "direction": "in"})
        assert [n["document_id"] for n in around["nodes"]] == [doc_id]
        assert [e["edge_type"] for e in around["edges"]] == ["depends_on"]
        assert "Not found" in await s.fails("agor_kb_graph_neighbors", {"documentId": str(secret.pk)})

        assert "limit" in (await s.fails("agor_teammate_context", {"limit": 0})).lower()
        assert "query" in (await s.fails("agor_teammate_memory_search", {"query": "x" * 1001})).lower()

    run_bridge(live_server, alice.token, tmp_path, scenario)


@pytest.mark.parametrize("token", ["kb_not-a-real-token", ""], ids=["rejected", "missing"])
def test_start_up_reports_a_bad_token_on_stderr_and_keeps_stdout_for_the_protocol(live_server, tmp_path, token):
    env = {**os.environ, "AGOR_URL": live_server.url, "AGOR_TOKEN": token, "AGOR_CONFIG_DIR": str(tmp_path)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    # stdin at EOF: the server starts, reports, finds no client and exits instead of hanging.
    result = subprocess.run(
        [sys.executable, "-m", "mcp_bridge"], env=env, cwd=str(ROOT), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    expected = "rejected the token" if token else "Knowledge is not configured"
    assert expected in result.stderr
    assert result.stdout == ""
