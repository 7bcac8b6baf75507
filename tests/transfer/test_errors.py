"""Which failures stop a run, which only fail one document, and what the CLI prints about them."""

from __future__ import annotations

import threading

import httpx2
import pytest

from transfer import format as fmt
from transfer.client import ApiError, KnowledgeClient
from transfer.errors import MAX_DETAILS, Failures, TransferError, from_api
from transfer.exporter import read_inventory
from transfer.progress import Progress
from transfer.terminal import escape_text, safe_json


def error(status: int, code: str = "error", fields: tuple[str, ...] = ()) -> ApiError:
    return ApiError(status=status, code=code, method="POST", route="/kb/transfers/documents", fields=fields)


@pytest.mark.parametrize("status", [401, 403, 405, 429, 502, 503, 504])
def test_systemic_failures_stop_every_stage(status):
    for stage in ("planning", "exporting", "importing", "reconciling", "namespace"):
        assert from_api(error(status), stage=stage, key="d000001").fatal


@pytest.mark.parametrize(("status", "code"), [(409, "path_taken"), (500, "server_error"), (413, "content_too_large")])
def test_document_failures_continue_in_document_stages(status, code):
    assert not from_api(error(status, code), stage="importing", key="d000001").fatal
    assert from_api(error(status, code), stage="planning").fatal
    assert from_api(error(status, code), stage="namespace").fatal


def test_namespace_wide_limit_and_schema_errors_stop():
    assert from_api(error(413, "transfer_limit"), stage="importing").fatal
    schema = from_api(error(400, "invalid", ("documents.0.kind",)), stage="importing")
    assert schema.fatal and "Invalid Knowledge transfer request (POST /kb/transfers/documents)" in schema.message
    assert "documents.0.kind" in schema.message and "agor --version" in schema.message
    assert from_api(error(404), stage="exporting", key="d000002").fatal is False
    assert from_api(error(404), stage="importing").fatal
    assert from_api(ApiError(status=0, code="transport", method="GET", route="/x"), stage="exporting").fatal


def test_details_are_capped_at_twenty_and_name_key_and_source():
    failures = Failures()
    for index in range(25):
        failures.add(
            TransferError("importing: HTTP 409 x", stage="importing", fatal=False, key=f"d{index:06d}", source_id="u")
        )
    lines = failures.details()
    assert len(lines) == MAX_DETAILS + 1 and lines[0] == "d000000 (source u): importing: HTTP 409 x"
    assert lines[-1] == "5 additional failures omitted"


def test_client_never_keeps_values_of_invalid_fields():
    def handler(request: httpx2.Request) -> httpx2.Response:
        body = {"detail": "x", "code": "invalid", "errors": {"documents": [{}, {"kind": ["SECRET"]}], "\x1bbad": ["v"]}}
        return httpx2.Response(400, json=body)

    client = KnowledgeClient("http://kb.test", "kb_token", transport=httpx2.MockTransport(handler))
    with pytest.raises(ApiError) as info:
        client.post("/kb/transfers/documents", {"a": 1}, route="/kb/transfers/documents")
    assert info.value.fields == ("documents.1.kind", "?") and "SECRET" not in str(info.value.fields)


def _inventory_client(pages: list[dict]) -> KnowledgeClient:
    calls = iter(pages)

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=next(calls))

    return KnowledgeClient("http://kb.test", "t", transport=httpx2.MockTransport(handler))


def entry(doc_id: str) -> dict:
    return {"document_id": doc_id, "path": f"{doc_id}.md"}


@pytest.mark.parametrize(
    "pages",
    [
        [{"entries": [entry("a")], "total": 2, "next_cursor": "a"}, {"entries": [], "total": 2, "next_cursor": None}],
        [
            {"entries": [entry("a")], "total": 2, "next_cursor": "a"},
            {"entries": [entry("b")], "total": 3, "next_cursor": None},
        ],
        [
            {"entries": [entry("b")], "total": 2, "next_cursor": "b"},
            {"entries": [entry("a")], "total": 2, "next_cursor": None},
        ],
        [{"entries": [entry("a")], "total": 2, "next_cursor": None}],
    ],
)
def test_unreliable_inventories_stop_the_run(pages):
    with pytest.raises(TransferError) as info:
        read_inventory(_inventory_client(pages), "ns", Progress(quiet=True), "Planning")
    assert "unreliable" in info.value.message and info.value.fatal


def test_escaping_is_one_function_for_every_output():
    hostile = "a\x1b]8;;https://evil\x07b\r\u202e\u200b\x9b"
    assert escape_text(hostile) == "a\\x1b]8;;https://evil\\x07b\\x0d\\u202e\\u200b\\x9b"
    assert escape_text("line\n\tnext", multiline=True) == "line\n\tnext"
    import json

    text = safe_json({"t": hostile})
    assert json.loads(text) == {"t": hostile} and "\x1b" not in text and "\u202e" not in text


def test_progress_lines(capsys):
    import io

    stream = io.StringIO()
    progress = Progress(stream, tty=False)
    progress.start("Importing", total=2, total_bytes=10)
    progress.advance(1, 4)
    progress.advance(1, 6)
    progress.finish()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("Importing: 0 / 2 0 / 10 bytes | elapsed ")
    assert lines[-1].startswith("Importing: 2 / 2 10 / 10 bytes")
    tty = io.StringIO()
    animated = Progress(tty, tty=True)
    animated.start("Planning: source inventory")
    animated.finish()
    assert tty.getvalue().startswith("\r\x1b[KPlanning: source inventory: 0 discovered")
    assert threading.active_count() >= 1 and fmt.VERSION == 2


def test_export_refuses_namespaces_no_import_could_accept():
    from transfer.exporter import _check_limits

    _check_limits([{"bytes": fmt.MAX_TOTAL_BYTES}])
    with pytest.raises(TransferError):
        _check_limits([{"bytes": fmt.MAX_TOTAL_BYTES + 1}])
    with pytest.raises(TransferError):
        _check_limits([{"bytes": 1}] * (fmt.MAX_DOCUMENTS + 1))


def _receipt_plan(*keys: str):
    from types import SimpleNamespace

    return SimpleNamespace(target_slug="dest", bundle="b" * 64, items=[SimpleNamespace(key=k) for k in keys])


def test_destination_receipts_are_read_again_while_a_killed_run_settles():
    from transfer.importer import destination_receipts

    moving = {"namespace": {"slug": "dest"}, "receipts": [{"key": "k1"}], "total": 1, "next_cursor": "k1"}
    grown = {"namespace": {"slug": "dest"}, "receipts": [{"key": "k2"}], "total": 2, "next_cursor": None}
    settled = {"namespace": {"slug": "dest"}, "receipts": [{"key": "k1"}, {"key": "k2"}], "total": 2}
    progress = Progress(quiet=True)
    namespace, receipts = destination_receipts(
        _inventory_client([moving, grown, settled]), _receipt_plan("k1", "k2"), progress, pause=0
    )
    assert namespace == {"slug": "dest"} and set(receipts) == {"k1", "k2"}

    with pytest.raises(TransferError) as info:
        destination_receipts(_inventory_client([moving, grown] * 5), _receipt_plan("k1", "k2"), progress, pause=0)
    assert "unreliable" in info.value.message and info.value.fatal
