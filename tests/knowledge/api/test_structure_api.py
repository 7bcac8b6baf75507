"""Outline, range and edits over real HTTP: shapes, every error code, access, versions."""

from __future__ import annotations

import hashlib
import json

import pytest

from knowledge.models import DocumentVersion
from tests.conftest import create_document, create_namespace, grant

pytestmark = pytest.mark.django_db(transaction=True)

CONTENT = (
    "# Guide\n"
    "intro\n"
    "```sh\n"
    "# not a heading\n"
    "```\n"
    "## Install\n"
    "step 1\n"
    "step 2\n"
    "\n"
    "Usage\n"
    "-----\n"
    "run it\n"
    "## Install\n"
    "again\n"
)


@pytest.fixture
def doc(http, alice, bob, make_member):
    create_namespace(http, alice, "eng")
    grant(http, alice, "eng", [("bob", "read")])
    return create_document(http, alice, "eng", "guides/setup.md", CONTENT)


def versions(doc) -> int:
    return DocumentVersion.objects.filter(document_id=doc["id"]).count()


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


# --- outline -----------------------------------------------------------------------------------


def test_outline_shape(http, alice, doc):
    response = http.as_(alice).get(f"/kb/documents/{doc['id']}/outline")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["document"]["id"] == doc["id"] and "content" not in body["document"]
    assert body["version"] == {k: doc["current_version"][k] for k in ("id", "number")} | {
        "sha256": hashlib.sha256(CONTENT.encode()).hexdigest()
    }
    assert body["line_count"] == 14
    rows = [(h["title"], h["section_ref"], h["start_line"], h["end_line"], h["occurrence"]) for h in body["headings"]]
    assert rows == [
        ("Guide", "root.h1[1]", 1, 14, 1),
        ("Install", "root.h1[1].h2[1]", 6, 9, 1),
        ("Usage", "root.h1[1].h2[2]", 10, 12, 1),
        ("Install", "root.h1[1].h2[3]", 13, 14, 2),
    ]
    install = body["headings"][1]
    assert install == {
        "level": 2,
        "title": "Install",
        "heading_path": "Guide > Install",
        "section_ref": "root.h1[1].h2[1]",
        "occurrence": 1,
        "start_line": 6,
        "end_line": 9,
        "content_start_line": 7,
        "chars": len("## Install\nstep 1\nstep 2\n\n"),
        "anchor": "install",
    }
    assert body["headings"][2]["content_start_line"] == 12  # after the setext underline


def test_outline_max_depth_and_versions(http, alice, bob, doc):
    client = http.as_(alice)
    assert [h["level"] for h in client.get(f"/kb/documents/{doc['id']}/outline?max_depth=1").json()["headings"]] == [1]
    client.post(f"/kb/documents/{doc['id']}/revise", json={"content": "# New\n", "expected_version": 1})
    assert client.get(f"/kb/documents/{doc['id']}/outline").json()["line_count"] == 1
    old = client.get(f"/kb/documents/{doc['id']}/outline", params={"version": 1}).json()
    assert old["version"]["number"] == 1 and len(old["headings"]) == 4
    by_id = client.get(f"/kb/documents/{doc['id']}/outline", params={"version": doc["current_version"]["id"]})
    assert by_id.json()["version"]["number"] == 1
    # a reader may read the structure
    assert http.as_(bob).get(f"/kb/documents/{doc['id']}/outline").status_code == 200


def test_outline_bad_input_is_400(http, alice, doc):
    for params in [
        {"max_depth": 0},
        {"max_depth": 7},
        {"max_depth": "x"},
        {"version": "latest"},
        {"version": "9" * 11},
    ]:
        response = http.as_(alice).get(f"/kb/documents/{doc['id']}/outline", params=params)
        assert response.status_code == 400, (params, response.text)
        assert response.json()["code"] == "invalid"


def test_outline_missing_invisible_and_unknown_version_are_404(http, alice, make_member, doc):
    stranger = make_member("member", username="carol")
    for member, url in [
        (alice, "/kb/documents/not-a-uuid/outline"),
        (alice, "/kb/documents/00000000-0000-0000-0000-000000000000/outline"),
        (alice, f"/kb/documents/{doc['id']}/outline?version=9"),
        (stranger, f"/kb/documents/{doc['id']}/outline"),
        (stranger, f"/kb/documents/{doc['id']}/range?start_line=1&end_line=1"),
    ]:
        response = http.as_(member).get(url)
        assert response.status_code == 404, (url, response.text)
        assert response.json()["code"] == "not_found"
    assert http.as_(None).get(f"/kb/documents/{doc['id']}/outline").status_code == 401


# --- range -------------------------------------------------------------------------------------


def test_range_by_section_ref(http, alice, doc):
    response = http.as_(alice).get(
        f"/kb/documents/{doc['id']}/range", params={"section_ref": "root.h1[1].h2[1]", "context_lines": 1}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["line_count"] == 14 and body["version"]["number"] == 1 and "content" not in body["document"]
    assert body["range"] == {
        "start_line": 6,
        "end_line": 9,
        "context_start_line": 5,
        "context_end_line": 10,
        "content": "```\n## Install\nstep 1\nstep 2\n\nUsage",
        "numbered_content": "5: ```\n6: ## Install\n7: step 1\n8: step 2\n9: \n10: Usage",
        "content_md5": md5("## Install\nstep 1\nstep 2\n"),
    }


def test_range_by_heading_path_lines_and_paging(http, alice, doc):
    client = http.as_(alice)
    url = f"/kb/documents/{doc['id']}/range"
    second = client.get(url, params={"heading_path": "Guide > Install", "occurrence": 2, "context_lines": 0}).json()
    assert (second["range"]["start_line"], second["range"]["content"]) == (13, "## Install\nagain")
    lines = client.get(url, params={"start_line": 2, "end_line": 2, "include_line_numbers": "false"}).json()["range"]
    assert "numbered_content" not in lines and lines["context_start_line"] == 1 and lines["context_end_line"] == 4
    paged = client.get(url, params={"section_ref": "root.h1[1]", "offset_lines": 5, "max_lines": 3}).json()["range"]
    assert (paged["start_line"], paged["end_line"]) == (6, 8)
    assert paged["source_range"] == {"start_line": 1, "end_line": 14, "omitted_before": 5, "omitted_after": 6}
    assert "source_range" not in client.get(url, params={"section_ref": "root.h1[1]"}).json()["range"]


RANGE_ERRORS = [
    ({}, "range_required"),
    ({"start_line": 2}, "range_required"),
    ({"start_line": 3, "end_line": 2}, "invalid_range"),
    ({"start_line": 1, "end_line": 15}, "range_out_of_bounds"),
    ({"start_line": 1, "end_line": 2, "offset_lines": 2}, "invalid_offset"),
    ({"section_ref": "root.h1[2]"}, "section_not_found"),
    ({"heading_path": "Guide > Missing"}, "heading_not_found"),
    ({"heading_path": "Guide > Install", "occurrence": 3}, "occurrence_not_found"),
    ({"start_line": 0, "end_line": 1}, "invalid"),
    ({"start_line": -1, "end_line": 1}, "invalid"),
    ({"start_line": "x", "end_line": 1}, "invalid"),
    ({"start_line": 1, "end_line": 10**12}, "invalid"),
    ({"start_line": 1, "end_line": 1, "max_lines": 1001}, "invalid"),
    ({"start_line": 1, "end_line": 1, "max_lines": 0}, "invalid"),
    ({"start_line": 1, "end_line": 1, "offset_lines": -1}, "invalid"),
    ({"start_line": 1, "end_line": 1, "context_lines": 21}, "invalid"),
    ({"heading_path": "x", "occurrence": 0}, "invalid"),
    ({"start_line": 1, "end_line": 1, "include_line_numbers": "maybe"}, "invalid"),
    ({"section_ref": "a\x00b"}, "invalid"),
]


def test_range_errors(http, alice, doc):
    for params, code in RANGE_ERRORS:
        response = http.as_(alice).get(f"/kb/documents/{doc['id']}/range", params=params)
        assert response.status_code == 400, (params, response.text)
        body = response.json()
        assert body["code"] == code and body["detail"], (params, body)


# --- edits -------------------------------------------------------------------------------------


def edit(http, member, doc, **body):
    return http.as_(member).post(f"/kb/documents/{doc['id']}/edits", json=body)


def test_edit_creates_exactly_one_version(http, alice, doc):
    selected = (
        http.as_(alice)
        .get(f"/kb/documents/{doc['id']}/range", params={"section_ref": "root.h1[1].h2[1]"})
        .json()["range"]
    )
    ops = [
        {
            "type": "replace_line_range",
            "start_line": 6,
            "end_line": 9,
            "replacement": "## Install\nstep one",
            "expected_md5": selected["content_md5"],
        },
        {"type": "insert_at_line", "line": 1, "content": "<!-- top -->", "expected_neighbor_text": "# Guide"},
        {"type": "replace_literal", "find": "again", "replace": "once more", "expected_count": 1},
        {"type": "delete_line_range", "start_line": 3, "end_line": 3, "expected_text": "intro"},
    ]
    response = edit(http, alice, doc, expected_version=1, ops=ops, change_summary="tidy", include_content=True)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["changed"] is True and body["dry_run"] is False
    assert body["base_version"]["number"] == 1 and body["new_version"]["number"] == 2
    assert body["document"]["current_version"]["id"] == body["new_version"]["id"]
    assert body["content"].startswith("<!-- top -->\n# Guide\n```sh\n") and "once more" in body["content"]
    assert body["diff"].startswith("--- a/guides/setup.md\n+++ b/guides/setup.md\n@@ ")
    assert body["changed_ranges"] == [
        {"start_line": 1, "end_line": 1},
        {"start_line": 3, "end_line": 2},
        {"start_line": 7, "end_line": 7},
        {"start_line": 12, "end_line": 12},
    ]
    assert versions(doc) == 2
    version = http.as_(alice).get(f"/kb/documents/{doc['id']}/versions/2").json()
    assert version["content"] == body["content"] and version["change_summary"] == "tidy"
    assert version["metadata"]["base_version_number"] == 1


def test_dry_run_changes_nothing_and_shows_the_real_diff(http, alice, doc):
    ops = [{"type": "replace_literal", "find": "step", "replace": "Step", "expected_count": 2}]
    dry = edit(http, alice, doc, ops=ops, dry_run=True)
    assert dry.status_code == 200, dry.text
    body = dry.json()
    assert body["dry_run"] is True and body["changed"] is True and body["new_version"] is None
    assert "content" not in body and "-step 1\n-step 2\n+Step 1\n+Step 2\n" in body["diff"]
    assert versions(doc) == 1
    real = edit(http, alice, doc, ops=ops, expected_version=doc["current_version"]["id"]).json()
    assert real["diff"] == body["diff"] and real["changed_ranges"] == body["changed_ranges"]
    assert versions(doc) == 2


def test_no_op_creates_no_version(http, alice, doc):
    ops = [{"type": "replace_line_range", "start_line": 2, "end_line": 2, "replacement": "intro"}]
    body = edit(http, alice, doc, ops=ops, expected_version=1).json()
    assert body["changed"] is False and body["new_version"] is None and body["diff"] == ""
    assert body["changed_ranges"] == [] and versions(doc) == 1


def test_stale_expected_version_is_409(http, alice, doc):
    ops = [{"type": "insert_at_line", "line": 15, "content": "tail"}]
    assert edit(http, alice, doc, ops=ops, expected_version=1).status_code == 200
    response = edit(http, alice, doc, ops=ops, expected_version=1)
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "version_conflict" and body["current_version"]["number"] == 2
    assert edit(http, alice, doc, ops=ops, expected_version=1, dry_run=True).status_code == 409
    assert versions(doc) == 2


def test_reader_gets_403_even_for_a_dry_run_and_stranger_404(http, alice, bob, make_member, doc):
    ops = [{"type": "insert_at_line", "line": 1, "content": "x"}]
    for dry_run in (True, False):
        response = edit(http, bob, doc, ops=ops, expected_version=1, dry_run=dry_run)
        assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    stranger = make_member("member", username="carol")
    response = edit(http, stranger, doc, ops=ops, expected_version=1, dry_run=True)
    assert response.status_code == 404 and response.json()["code"] == "not_found"
    response = http.as_(alice).post("/kb/documents/nope/edits", json={"ops": ops, "dry_run": True})
    assert response.status_code == 404
    assert versions(doc) == 1


def test_archived_document_is_409(http, alice, doc):
    assert http.as_(alice).delete(f"/kb/documents/{doc['id']}").status_code == 200
    response = edit(http, alice, doc, ops=[{"type": "insert_at_line", "line": 1, "content": "x"}], expected_version=1)
    assert response.status_code == 409 and response.json()["code"] == "document_archived"


OP_FAILURES = [
    (
        {"type": "replace_line_range", "start_line": 2, "end_line": 2, "replacement": "x", "expected_text": "no"},
        "ops[0] (replace_line_range): expected_text mismatch",
    ),
    (
        {"type": "delete_line_range", "start_line": 2, "end_line": 2, "expected_md5": "0" * 32},
        "ops[0] (delete_line_range): expected_md5 mismatch",
    ),
    ({"type": "delete_line_range", "start_line": 14, "end_line": 15}, "exceeds document length (14 lines)"),
    ({"type": "replace_line_range", "start_line": 3, "end_line": 2, "replacement": ""}, "invalid range 3-2"),
    ({"type": "insert_at_line", "line": 15, "position": "after", "content": "x"}, "line 15 out of range"),
    (
        {"type": "insert_at_line", "line": 2, "content": "x", "expected_neighbor_text": "no"},
        "expected_neighbor_text mismatch",
    ),
    (
        {"type": "replace_literal", "find": "Install", "replace": "x", "expected_count": 1},
        "expected_count mismatch: 1 expected, 2 found",
    ),
    ({"type": "replace_literal", "find": "absent", "replace": "x", "expected_count": 1}, "0 found"),
]


def test_op_failures_are_edit_failed(http, alice, doc):
    for op, message in OP_FAILURES:
        response = edit(http, alice, doc, ops=[op], expected_version=1)
        assert response.status_code == 400, (op, response.text)
        body = response.json()
        assert body["code"] == "edit_failed" and message in body["detail"] and body["op_index"] == 0, (op, body)
    assert versions(doc) == 1


BAD_EDITS = [
    ({"ops": [{"type": "insert_at_line", "line": 1, "content": "x"}]}, "expected_version"),
    ({"ops": [], "expected_version": 1}, "ops"),
    ({"ops": [{"type": "insert_at_line", "line": 1, "content": "x"}] * 101, "expected_version": 1}, "ops"),
    ({"ops": "nope", "expected_version": 1}, "ops"),
    ({"ops": [{"type": "rewrite"}], "expected_version": 1}, "ops"),
    ({"ops": [7], "expected_version": 1}, "ops"),
    ({"ops": [{"type": "insert_at_line", "line": 0, "content": "x"}], "expected_version": 1}, "ops"),
    ({"ops": [{"type": "insert_at_line", "line": 1, "content": 5}], "expected_version": 1}, "ops"),
    ({"ops": [{"type": "insert_at_line", "line": 1, "content": "x", "position": "mid"}], "expected_version": 1}, "ops"),
    (
        {
            "ops": [{"type": "insert_at_line", "line": 1, "content": "x", "expectedNeighborText": "y"}],
            "expected_version": 1,
        },
        "ops",
    ),
    (
        {"ops": [{"type": "replace_literal", "find": "", "replace": "x", "expected_count": 0}], "expected_version": 1},
        "ops",
    ),
    (
        {
            "ops": [{"type": "replace_literal", "find": "a", "replace": "x", "expected_count": -1}],
            "expected_version": 1,
        },
        "ops",
    ),
    (
        {
            "ops": [{"type": "delete_line_range", "start_line": 1, "end_line": 1, "expected_md5": "xyz"}],
            "expected_version": 1,
        },
        "ops",
    ),
    ({"ops": [{"type": "insert_at_line", "line": 1, "content": "x"}], "dryRun": True}, "dryRun"),
    ({"ops": [{"type": "insert_at_line", "line": 1, "content": "x"}], "dry_run": "perhaps"}, "dry_run"),
]


def test_bad_edit_input_is_400(http, alice, doc):
    for body, field in BAD_EDITS:
        response = http.as_(alice).post(f"/kb/documents/{doc['id']}/edits", json=body)
        assert response.status_code == 400, (body, response.text)
        payload = response.json()
        assert payload["code"] == "invalid", payload
        assert field in payload.get("errors", {}) or payload.get("field") == field, payload
    assert versions(doc) == 1


def test_lone_surrogates_and_non_objects_are_400(http, alice, doc):
    raw = '{"expected_version": 1, "ops": [{"type": "insert_at_line", "line": 1, "content": "\\ud800"}]}'
    url = f"/kb/documents/{doc['id']}/edits"
    client = http.as_(alice)
    response = client.post(url, content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and "surrogate" in json.dumps(response.json()["errors"])
    assert client.post(url, json=[1, 2]).status_code == 400
    assert client.post(url, content=b"\xff\xfe", headers={"Content-Type": "application/json"}).status_code == 400
    assert versions(doc) == 1
