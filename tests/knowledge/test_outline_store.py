"""Stored outlines (DocumentOutline): filled on first read, identical to parsing, cascading."""

from __future__ import annotations

from uuid import uuid4

import pytest

from knowledge import selectors, structure, version_cache
from knowledge.models import DocumentOutline, DocumentVersion
from knowledge.services import version_outlines_store
from knowledge.tasks import store_outline_task
from tests.conftest import create_document, create_namespace

pytestmark = pytest.mark.django_db(transaction=True)

CONTENT = "# Guide\nintro\n```sh\n# not a heading\n```\n## Install\nstep 1\n\nUsage\n-----\nrun it\n## Install\nagain\n"


@pytest.fixture
def doc(http, alice):
    create_namespace(http, alice, "eng")
    return create_document(http, alice, "eng", "guides/setup.md", CONTENT)


def current_version(doc) -> DocumentVersion:
    return DocumentVersion.objects.filter(document_id=doc["id"]).order_by("-number").first()


def test_saving_stores_the_outline_after_commit(http, alice, doc):
    stored = DocumentOutline.objects.get(version=current_version(doc))
    assert stored.line_count == structure.outline(CONTENT).line_count
    assert structure.outline_from_data(stored.line_count, stored.headings) == structure.outline(CONTENT)


def test_outline_task_skips_a_purged_version(http, alice, doc):
    assert store_outline_task(str(current_version(doc).pk)) is True
    assert store_outline_task(str(uuid4())) is False


def test_outlines_of_many_versions_are_stored_together_and_idempotently(http, alice, doc):
    other = create_document(http, alice, "eng", "other.md", "# One\n\n## Two\n")
    versions = [current_version(doc).pk, current_version(other).pk]
    DocumentOutline.objects.filter(version_id__in=versions).delete()
    assert version_outlines_store(version_ids=[*versions, uuid4()]) == 2
    stored = DocumentOutline.objects.get(version_id=versions[1])
    assert [h["title"] for h in stored.headings] == ["One", "Two"] and stored.line_count == 3
    assert version_outlines_store(version_ids=versions) == 2
    assert DocumentOutline.objects.filter(version_id__in=versions).count() == 2


def test_outline_computed_and_stored_on_first_read(http, alice, doc):
    version = current_version(doc)
    DocumentOutline.objects.all().delete()
    version_cache.clear()
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
    version_cache.clear()
    assert client.get(f"/kb/documents/{doc['id']}/outline").json() == stored
    DocumentOutline.objects.all().delete()
    version_cache.clear()
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


# --- the per-process version cache ---------------------------------------------------------------


def test_each_version_answers_with_its_own_lines_and_outline(http, alice, doc):
    client = http.as_(alice)
    revised = client.post(f"/kb/documents/{doc['id']}/revise", json={"content": "# Other\nonly line\n"})
    assert revised.status_code in (200, 201), revised.text
    for _ in range(2):  # the second round is served from the cache
        old = client.get(f"/kb/documents/{doc['id']}/range?version=1&start_line=1&end_line=2&context_lines=0")
        new = client.get(f"/kb/documents/{doc['id']}/range?start_line=1&end_line=2&context_lines=0")
        assert old.json()["range"]["content"] == "# Guide\nintro"
        assert new.json()["range"]["content"] == "# Other\nonly line"
        old_outline = client.get(f"/kb/documents/{doc['id']}/outline?version=1").json()
        assert [h["title"] for h in old_outline["headings"]] == ["Guide", "Install", "Usage", "Install"]
        assert [h["title"] for h in client.get(f"/kb/documents/{doc['id']}/outline").json()["headings"]] == ["Other"]
        depth_one = client.get(f"/kb/documents/{doc['id']}/outline?version=1&max_depth=1").json()
        assert [h["title"] for h in depth_one["headings"]] == ["Guide"]


def test_a_warm_cache_never_answers_for_someone_who_cannot_read(http, alice, bob, doc):
    url = f"/kb/documents/{doc['id']}"
    assert http.as_(alice).get(f"{url}/range?start_line=1&end_line=2").status_code == 200
    assert http.as_(alice).get(f"{url}/outline").status_code == 200
    for path in ("/range?start_line=1&end_line=2", "/outline", "/range?section_ref=root.h1[1]"):
        response = http.as_(bob).get(url + path)
        assert response.status_code == 404, (path, response.text)
        assert "Guide" not in response.text


def test_lines_are_fetched_once_then_served_from_memory(alice, doc, django_assert_num_queries):
    version = DocumentVersion.objects.defer("content").get(pk=current_version(doc).pk)
    version_cache.clear()
    with django_assert_num_queries(1):  # the deferred content
        first = selectors.version_lines(version=version)
    again = DocumentVersion.objects.defer("content").get(pk=version.pk)
    with django_assert_num_queries(0):
        assert selectors.version_lines(version=again) == first == structure.split_document(CONTENT)[0]
    with django_assert_num_queries(1):  # the stored outline
        assert selectors.version_outline(version=again) == structure.outline(CONTENT)
    with django_assert_num_queries(0):
        assert selectors.version_outline(version=version) == structure.outline(CONTENT)


def test_a_zero_budget_turns_the_cache_off(alice, doc, settings, django_assert_num_queries):
    settings.KNOWLEDGE_VERSION_CACHE_BYTES = 0
    for _ in range(2):
        version = DocumentVersion.objects.defer("content").get(pk=current_version(doc).pk)
        with django_assert_num_queries(1):
            selectors.version_lines(version=version)


def test_the_cache_evicts_least_recently_used_entries_beyond_its_budget(settings):
    settings.KNOWLEDGE_VERSION_CACHE_BYTES = 100
    loads: list[str] = []

    def loader(key: str, size: int):
        def load():
            loads.append(key)
            return key.upper(), size

        return load

    assert version_cache.cached("a", loader("a", 40)) == "A"
    assert version_cache.cached("b", loader("b", 40)) == "B"
    assert version_cache.cached("a", loader("a", 40)) == "A"  # hit; "b" is now the oldest
    assert version_cache.cached("c", loader("c", 40)) == "C"  # over budget: "b" goes
    assert version_cache.cached("a", loader("a", 40)) == "A"
    assert version_cache.cached("b", loader("b", 40)) == "B"
    assert version_cache.cached("huge", loader("huge", 101)) == "HUGE"  # larger than the budget: not kept
    assert version_cache.cached("huge", loader("huge", 101)) == "HUGE"
    assert loads == ["a", "b", "c", "b", "huge", "huge"]
