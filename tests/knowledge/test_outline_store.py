"""Stored outlines (DocumentOutline): filled on first read, identical to parsing, cascading."""

from __future__ import annotations

import pytest

from knowledge import selectors, structure
from knowledge.models import DocumentOutline, DocumentVersion
from tests.conftest import create_document, create_namespace

pytestmark = pytest.mark.django_db(transaction=True)

CONTENT = "# Guide\nintro\n```sh\n# not a heading\n```\n## Install\nstep 1\n\nUsage\n-----\nrun it\n## Install\nagain\n"


@pytest.fixture
def doc(http, alice):
    create_namespace(http, alice, "eng")
    return create_document(http, alice, "eng", "guides/setup.md", CONTENT)


def current_version(doc) -> DocumentVersion:
    return DocumentVersion.objects.filter(document_id=doc["id"]).order_by("-number").first()


def test_saving_stores_no_outline_and_the_first_read_does(http, alice, doc):
    version = current_version(doc)
    assert not DocumentOutline.objects.filter(version=version).exists()
    http.as_(alice).get(f"/kb/documents/{doc['id']}/outline")
    stored = DocumentOutline.objects.get(version=version)
    assert stored.line_count == structure.outline(CONTENT).line_count
    assert structure.outline_from_data(stored.line_count, stored.headings) == structure.outline(CONTENT)


def test_outline_computed_and_stored_on_first_read(http, alice, doc):
    version = current_version(doc)
    DocumentOutline.objects.all().delete()
    response = http.as_(alice).get(f"/kb/documents/{doc['id']}/outline")
    assert response.status_code == 200
    stored = DocumentOutline.objects.get(version=version)
    expected = structure.outline(CONTENT)
    assert response.json()["line_count"] == expected.line_count == stored.line_count
    assert response.json()["headings"] == [h.as_dict() for h in expected.headings]
    assert selectors.version_outline(version=version) == expected


def test_stored_and_computed_api_output_identical(http, alice, doc):
    client = http.as_(alice)
    stored = client.get(f"/kb/documents/{doc['id']}/outline").json()
    ranged = client.get(f"/kb/documents/{doc['id']}/range?section_ref=root.h1[1].h2[2]").json()
    DocumentOutline.objects.all().delete()
    assert client.get(f"/kb/documents/{doc['id']}/outline").json() == stored
    DocumentOutline.objects.all().delete()
    assert client.get(f"/kb/documents/{doc['id']}/range?section_ref=root.h1[1].h2[2]").json() == ranged


@pytest.mark.parametrize(
    "content",
    ["a\nb\nc\n", "a\nb\nc", "a\r\nb\r\nc\r\n", "é\n# ü ñ\n日本語\n", "x"],
    ids=["lf", "no-trailing-newline", "crlf", "unicode", "one-line"],
)
def test_range_edges(http, alice, content):
    create_namespace(http, alice, "eng")
    doc = create_document(http, alice, "eng", "edge.md", content)
    lines, _ = structure.split_document(content)
    client = http.as_(alice)
    for start, end in [(1, 1), (len(lines), len(lines)), (1, len(lines))]:
        url = f"/kb/documents/{doc['id']}/range?start_line={start}&end_line={end}&context_lines=0"
        body = client.get(url).json()
        assert body["line_count"] == len(lines)
        assert body["range"]["content"] == "\n".join(lines[start - 1 : end])
        assert body["range"]["content_md5"] == structure.lines_md5(lines[start - 1 : end])
    too_far = client.get(f"/kb/documents/{doc['id']}/range?start_line=1&end_line={len(lines) + 1}")
    assert too_far.status_code == 400


def test_outline_cascades_with_version(http, alice, doc):
    client = http.as_(alice)
    revised = client.post(f"/kb/documents/{doc['id']}/revise", json={"content": CONTENT + "## More\n"})
    assert revised.status_code in (200, 201), revised.text
    first = DocumentVersion.objects.get(document_id=doc["id"], number=1)
    client.get(f"/kb/documents/{doc['id']}/outline?version=1")
    client.get(f"/kb/documents/{doc['id']}/outline")
    assert DocumentOutline.objects.filter(version_id=first.pk).exists()
    assert DocumentOutline.objects.count() == 2
    DocumentVersion.objects.filter(pk=first.pk).delete()  # the queryset path purges use
    assert not DocumentOutline.objects.filter(version_id=first.pk).exists()
    assert DocumentOutline.objects.count() == 1
