"""Schemas, bounds and error shaping, with the in-memory MCP client and a transport stub for HTTP."""

from __future__ import annotations

import json

import httpx2
from mcp import Client

from mcp_bridge.bounds import MAX_RESULT_CHARS, bound_result, truncate_content
from mcp_bridge.client import KnowledgeApi
from mcp_bridge.config import AgorConfig
from mcp_bridge.server import build_server
from tests.mcp_bridge import run_async

EXPECTED_TOOLS = {
    "agor_kb_namespaces_list",
    "agor_kb_namespace_put",
    "agor_kb_tree",
    "agor_kb_search",
    "agor_kb_get",
    "agor_kb_outline",
    "agor_kb_get_range",
    "agor_kb_put",
    "agor_kb_edit",
    "agor_kb_materialize",
    "agor_kb_publish_from_worktree",
    "agor_kb_history",
    "agor_kb_link",
    "agor_kb_graph_neighbors",
    "agor_kb_archive",
    "agor_kb_archive_bulk",
    "agor_teammate_context",
    "agor_teammate_memory_search",
    "agor_teammate_memory_append",
}


def _server(handler):
    config = AgorConfig(url="http://kb.test", token="kb_x", source="test")
    api = KnowledgeApi(config, transport=httpx2.MockTransport(handler))
    return build_server(config, api)


def _call(server, name, args):
    async def run():
        async with Client(server) as client:
            return await client.call_tool(name, args)

    return run_async(run)


def test_every_tool_is_listed_with_schemas_and_hints():
    async def run():
        async with Client(_server(lambda r: httpx2.Response(200, json={}))) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in run_async(run)}
    assert set(tools) == EXPECTED_TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 20
        assert tool.input_schema["type"] == "object" and tool.output_schema is not None
        assert tool.annotations is not None
    assert tools["agor_kb_search"].annotations.read_only_hint is True
    assert tools["agor_kb_archive"].annotations.destructive_hint is True
    assert tools["agor_kb_put"].annotations.idempotent_hint is True
    limit = tools["agor_kb_search"].input_schema["properties"]["limit"]
    assert limit["maximum"] == 100 and limit["minimum"] == 1
    assert tools["agor_kb_archive_bulk"].input_schema["properties"]["targets"]["maxItems"] == 50


def test_missing_reference_gives_the_standard_message():
    result = _call(_server(lambda r: httpx2.Response(200, json={})), "agor_kb_get", {})
    assert result.is_error
    assert (
        "Provide documentId, a valid agor://kb/<namespace>/<path> uri, or namespace + path." in result.content[0].text
    )


def test_version_conflict_is_actionable():
    def handler(request):
        return httpx2.Response(
            409,
            json={"detail": "stale", "code": "version_conflict", "current_version": {"number": 7, "id": "x"}},
        )

    result = _call(_server(handler), "agor_kb_archive", {"documentId": "abc", "archived": True, "expectedVersion": 3})
    assert result.is_error and "version 7" in result.content[0].text and "expectedVersion=7" in result.content[0].text


def test_unconfigured_bridge_reports_one_clear_error():
    server = build_server(AgorConfig(url="", token="", source="missing"))
    result = _call(server, "agor_kb_search", {"query": "x"})
    assert result.is_error and "AGOR_URL" in result.content[0].text and "agor login" in result.content[0].text


def test_long_content_is_cut_at_a_line_with_a_hint():
    text = "".join(f"line {i}\n" for i in range(1, 50001))
    cut, info = truncate_content(text, 1000)
    assert cut.split("\n…[truncated")[0].endswith("\n")
    assert info["nextLine"] == cut.count("\n")  # lines kept plus the marker line
    assert "agor_kb_get_range with startLine=" in cut
    big = {"document": {"content": text * 3, "title": "t"}, "data": [{"content": text} for _ in range(3)]}
    bounded = bound_result(big)
    assert len(json.dumps(bounded)) <= MAX_RESULT_CHARS + 2000


def _document(**fields):
    """A document as the API returns it (the fields the bridge's output schema requires)."""
    return {
        "id": "d1",
        "reference_uri": "agor://kb/document/d1",
        "uri": "agor://kb/n/p.md",
        "url": "http://kb.test/ui/kb/n/p.md",
        "namespace": "n",
        "path": "p.md",
        "title": "P",
        "archived": False,
        "current_version": {"id": "v1", "number": 1, "sha256": "0" * 64},
        **fields,
    }


def test_output_schemas_publish_what_agents_rely_on():
    async def run():
        async with Client(_server(lambda r: httpx2.Response(200, json={}))) as client:
            return {t.name: t.output_schema for t in (await client.list_tools()).tools}

    schemas = run_async(run)
    search = schemas["agor_kb_search"]
    assert {"data", "total", "hasMore", "nextOffset", "relaxed"} <= set(search["required"])
    document = search["$defs"]["Document"]
    assert {"id", "reference_uri", "namespace", "path"} <= set(document["required"])
    assert "contentTruncation" in document["properties"]
    assert "section_ref" in schemas["agor_kb_outline"]["$defs"]["OutlineHeading"]["required"]
    assert "content_md5" in schemas["agor_kb_get_range"]["$defs"]["LineRange"]["required"]
    assert {"hasMore", "nextOffset"} <= set(schemas["agor_kb_tree"]["properties"])
    assert "deduped" in schemas["agor_teammate_memory_append"]["$defs"]["Appended"]["required"]
    for name, schema in schemas.items():
        assert schema.get("additionalProperties") is True, name


def test_an_answer_in_the_wrong_shape_is_an_actionable_tool_error():
    result = _call(_server(lambda r: httpx2.Response(200, json={"id": "d1"})), "agor_kb_get", {"documentId": "d1"})
    assert result.is_error
    message = result.content[0].text
    assert "unexpected shape" in message and "document.reference_uri" in message and "agor --version" in message


def test_extra_fields_from_a_newer_server_pass_through():
    body = _document(new_field={"x": 1})
    result = _call(_server(lambda r: httpx2.Response(200, json=body)), "agor_kb_get", {"documentId": "d1"})
    assert not result.is_error
    assert result.structured_content["document"]["new_field"] == {"x": 1}


def test_ten_mebibyte_document_never_floods_the_agent():
    body = _document(content="x" * 80 + "\n")
    body["content"] *= 130_000  # ~10 MiB

    result = _call(_server(lambda r: httpx2.Response(200, json=body)), "agor_kb_get", {"documentId": "d1"})
    assert not result.is_error
    assert len(result.content[0].text) < 120_000
    assert result.structured_content["document"]["contentTruncation"]["truncated"] is True


def test_a_symlink_out_of_the_worktree_is_refused(tmp_path):
    worktree, outside = tmp_path / "worktree", tmp_path / "outside"
    worktree.mkdir()
    outside.mkdir()
    (worktree / "notes").symlink_to(outside, target_is_directory=True)
    (outside / "stolen.md").write_text("# Not yours\n")
    body = _document(content="# P\n")
    server = _server(lambda r: httpx2.Response(200, json=body))

    written = _call(
        server, "agor_kb_materialize", {"documentId": "d1", "worktree": str(worktree), "subpath": "notes/p.md"}
    )
    assert written.is_error and "escapes the worktree" in written.content[0].text
    assert list(outside.iterdir()) == [outside / "stolen.md"]
    read = _call(
        server,
        "agor_kb_publish_from_worktree",
        {"worktree": str(worktree), "subpath": "notes/stolen.md", "namespace": "n", "path": "p.md"},
    )
    assert read.is_error and "escapes the worktree" in read.content[0].text
