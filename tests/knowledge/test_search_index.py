"""The text index after edits: kept chunk rows, moved line numbers and term counts all match
what indexing the content from scratch gives."""

from __future__ import annotations

import importlib
import random

import pytest
from django.db import connection

from knowledge import search, search_query, services
from knowledge.models import Document, SearchChunk, SearchTerm
from knowledge.search import _TERM_COUNTS, HEADER_ORDINAL, _path_words, chunk_lines, term_length
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db

WORDS = (
    "cache",
    "lease",
    "shard",
    "replica",
    "quota",
    "kernel",
    "ledger",
    "canary",
    "router",
    "digest",
    "tenant",
    "socket",
)


def _paragraphs(rng: random.Random, count: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 90))) for _ in range(count)]


def _chunk_rows(document) -> list[tuple]:
    return list(
        SearchChunk.objects.filter(document=document)
        .order_by("ordinal")
        .values_list("ordinal", "start_line", "end_line", "title", "path_text", "text")
    )


def _expected_rows(document, content: str) -> list[tuple]:
    header = (HEADER_ORDINAL, 1, 1, document.title, _path_words(document.path), "")
    return [header] + [(i, start, end, "", "", text) for i, (start, end, text) in enumerate(chunk_lines(content))]


def _term_rows(document) -> set[tuple]:
    return set(SearchTerm.objects.filter(document=document).values_list("lexeme", "body_tf", "title_tf", "doc_length"))


def _terms_from_scratch(document, content: str) -> set[tuple]:
    """The stored chunks' tsvectors counted by unnesting them: the delta's way, not the rebuild's
    (ts_stat), so each checks the other."""
    chunks = "SELECT ordinal, search_vector, 1 AS sign FROM knowledge_searchchunk WHERE document_id = %s"
    with connection.cursor() as cursor:
        cursor.execute(_TERM_COUNTS.format(chunks=chunks), [document.pk])
        length = term_length(len(content))
        return {(lexeme, body, title, length) for lexeme, body, title in cursor.fetchall()}


def _assert_index_matches(document, content: str) -> None:
    document.refresh_from_db()
    assert _chunk_rows(document) == _expected_rows(document, content)
    if connection.vendor == "postgresql":
        assert _term_rows(document) == _terms_from_scratch(document, content)
        assert _term_rows(document), "a document with words has term rows"
    else:
        assert not SearchTerm.objects.exists()  # SQLite ranks with FTS5 alone


@pytest.fixture
def namespace(alice):
    return namespace_create(actor=alice.actor, slug="idx")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_edits_leave_the_index_equal_to_a_fresh_one(alice, namespace, seed):
    rng = random.Random(seed)
    paragraphs = _paragraphs(rng, 60)
    content = "# Start\n\n" + "\n\n".join(paragraphs)
    document = services.document_create(actor=alice.actor, namespace=namespace, path="notes/log.md", content=content)
    _assert_index_matches(document, content)
    for step in range(12):
        lines = content.split("\n")
        roll = rng.random()
        at = rng.randrange(len(lines))
        if roll < 0.3:
            lines[at:at] = ["", *_paragraphs(rng, rng.randint(1, 3))]  # insert paragraphs
        elif roll < 0.5:
            del lines[at : at + rng.randint(1, 6)]  # delete some lines
        elif roll < 0.75:
            lines[at] = lines[at] + " " + rng.choice(WORDS)  # change one line in place
        elif roll < 0.9:
            lines.append(rng.choice(WORDS) * 2)  # a new, unseen word at the end
        else:
            lines = lines[: len(lines) // 2]  # truncate
        content = "\n".join(lines) or "empty"
        current = document.current_version.number if step == 0 else None
        document = services.document_revise(
            actor=alice.actor, document_id=document.pk, content=content, expected_version=current
        )
        _assert_index_matches(document, content)
    services.document_update(actor=alice.actor, document_id=document.pk, changes={"title": "Renamed ledger"})
    _assert_index_matches(document, content)
    services.document_update(actor=alice.actor, document_id=document.pk, changes={"path": "archive/old-log.md"})
    _assert_index_matches(document, content)


def test_an_edit_in_the_middle_keeps_almost_every_chunk_row(alice, namespace):
    rng = random.Random(7)
    paragraphs = _paragraphs(rng, 300)
    content = "\n\n".join(paragraphs)
    document = services.document_create(actor=alice.actor, namespace=namespace, path="big.md", content=content)
    before = set(SearchChunk.objects.filter(document=document).values_list("id", flat=True))
    paragraphs[150] += " an added sentence that shifts nothing else"
    paragraphs.insert(100, "A new paragraph.\nOn two lines.")
    content = "\n\n".join(paragraphs)
    services.document_revise(actor=alice.actor, document_id=document.pk, content=content)
    after = set(SearchChunk.objects.filter(document=document).values_list("id", flat=True))
    assert len(before) > 40
    assert len(before & after) >= len(before) - 6  # only the edited neighbourhoods were re-indexed
    _assert_index_matches(document, content)


def test_whole_document_edits_still_search_correctly(http, alice, namespace):
    rng = random.Random(11)
    content = "\n\n".join(_paragraphs(rng, 40))
    document = services.document_create(actor=alice.actor, namespace=namespace, path="swap.md", content=content)
    services.document_revise(actor=alice.actor, document_id=document.pk, content="zanzibar quoll\n\nnothing else")
    found = http.as_(alice).get("/kb/search", params={"q": "zanzibar"}).json()
    assert [hit["document"]["id"] for hit in found["data"]] == [str(document.pk)]
    gone = http.as_(alice).get("/kb/search", params={"q": '"kernel ledger"'}).json()
    assert gone["total"] == 0
    _assert_index_matches(document, "zanzibar quoll\n\nnothing else")


def test_rewriting_most_of_a_document_recounts_its_terms(alice, namespace, monkeypatch):
    """A rewrite keeping a few chunks recounts the document's terms instead of applying a delta,
    and the counts equal an index built from scratch."""
    rng = random.Random(12)
    kept = _paragraphs(rng, 4)
    content = "\n\n".join(kept + _paragraphs(rng, 40))
    document = services.document_create(actor=alice.actor, namespace=namespace, path="rewrite.md", content=content)
    kept_ids = set(SearchChunk.objects.filter(document=document, ordinal__lte=1).values_list("id", flat=True))
    deltas = []
    monkeypatch.setattr(search, "_update_terms", lambda *args, **kwargs: deltas.append(kwargs))
    content = "\n\n".join([*kept, "zanzibar " * 30, *_paragraphs(random.Random(13), 40)])
    services.document_revise(actor=alice.actor, document_id=document.pk, content=content)
    assert deltas == []  # no delta: a recount
    assert kept_ids & set(SearchChunk.objects.filter(document=document).values_list("id", flat=True))
    _assert_index_matches(document, content)
    if connection.vendor == "postgresql":
        assert SearchTerm.objects.get(document=document, lexeme="zanzibar").body_tf == 30


@pytest.mark.skipif(connection.vendor != "postgresql", reason="GIN's pending list is PostgreSQL's; FTS5 has none")
def test_a_large_write_leaves_the_gin_merge_to_a_worker(http, alice, namespace, monkeypatch):
    """PostgreSQL: a write of many chunks keeps its index entries in GIN's pending list (so the
    save does not merge them into the index) and queues the merge task after commit; its words
    are searchable before and after the merge."""
    with connection.cursor() as cursor:
        cursor.execute("SET gin_pending_list_limit = 64")  # kB, the least: any merge would run inside the write
    search.flush_pending_entries()
    rng = random.Random(21)
    paragraphs = [
        " ".join(f"w{rng.randrange(10**6)}" for _ in range(80)) for _ in range(4 * search.DEFERRED_MERGE_CHUNKS)
    ]
    paragraphs[-1] += " zanzibar"
    merge, found_while_pending, merged = search.flush_pending_entries, [], []

    def search_then_merge() -> int:
        found = http.as_(alice).get("/kb/search", params={"q": "zanzibar"}).json()
        found_while_pending.extend(hit["document"]["id"] for hit in found["data"])
        merged.append(merge())
        return merged[-1]

    monkeypatch.setattr(search, "flush_pending_entries", search_then_merge)
    document = services.document_create(
        actor=alice.actor, namespace=namespace, path="huge.md", content="\n\n".join(paragraphs)
    )
    assert SearchChunk.objects.filter(document=document).count() > search.DEFERRED_MERGE_CHUNKS
    assert found_while_pending == [str(document.pk)]
    assert len(merged) == 1, "one merge task, queued after commit"
    assert merged[0] > 4 * 64 // 8, "the write's entries were still pending (a merge inside it leaves under 8 pages)"
    assert merge() == 0
    found = http.as_(alice).get("/kb/search", params={"q": "zanzibar"}).json()
    assert [hit["document"]["id"] for hit in found["data"]] == [str(document.pk)]
    with connection.cursor() as cursor:
        cursor.execute("RESET gin_pending_list_limit")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="GIN's pending list is PostgreSQL's; FTS5 has none")
def test_one_merge_per_transaction_however_many_large_writes(http, alice, namespace, monkeypatch):
    from django.db import transaction

    rng = random.Random(22)
    merges = []
    monkeypatch.setattr(search, "flush_pending_entries", lambda: merges.append(1) or 0)
    monkeypatch.setattr(search, "DEFERRED_MERGE_CHUNKS", 20)

    def large() -> str:  # a paragraph a chunk: two would pass the chunk's maximum
        content = "\n\n".join(" ".join(f"w{rng.randrange(10**6)}" for _ in range(340)) for _ in range(24))
        assert len(search.chunk_lines(content)) >= search.DEFERRED_MERGE_CHUNKS
        return content

    with transaction.atomic():
        for name in ("one", "two", "three"):
            services.document_create(actor=alice.actor, namespace=namespace, path=f"{name}.md", content=large())
        assert merges == [], "queued for after commit"
    assert merges == [1]
    services.document_create(actor=alice.actor, namespace=namespace, path="four.md", content=large())
    assert merges == [1, 1], "the next transaction queues its own"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="TOAST is PostgreSQL's")
def test_chunk_rows_keep_their_tsvector_inline(alice, namespace):
    """A full chunk's tsvector stays in its row (phrase checks read it there), where the default
    2 KB row target would move it to the TOAST table."""
    if connection.pg_version < 170000:
        pytest.skip("PostgreSQL 17 tells where a value is stored (pg_column_toast_chunk_id)")
    rng = random.Random(31)
    content = "\n\n".join(" ".join(f"w{rng.randrange(10**6)}" for _ in range(300)) for _ in range(6))
    document = services.document_create(actor=alice.actor, namespace=namespace, path="wide.md", content=content)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_size(search_vector), pg_column_toast_chunk_id(search_vector) "
            "FROM knowledge_searchchunk WHERE document_id = %s AND ordinal >= 0",
            [document.pk],
        )
        rows = cursor.fetchall()
    assert rows and all(size > 2_000 for size, _ in rows), "each chunk's tsvector alone passes the default target"
    assert [toasted for _, toasted in rows] == [None] * len(rows)


def test_migration_copy_of_term_length_matches():
    migration = importlib.import_module("knowledge.migrations.0008_term_length_steps")
    for size in [0, 1, 7, 8, 100, 6_000, 65_536, 1 << 20, 10 << 20]:
        assert migration.term_length(size) == term_length(size)
    sizes = range(1_000, 200_000, 37)
    kept = sum(term_length(size) == term_length(size + 20) for size in sizes)
    assert kept / len(sizes) > 0.97  # a small edit almost always keeps the length
    assert term_length(6_000) < term_length(12_000)


def test_reindex_command_repairs_drifted_rows(alice, namespace):
    from io import StringIO

    from django.core.management import call_command

    content = "\n\n".join(_paragraphs(random.Random(3), 30))
    document = services.document_create(actor=alice.actor, namespace=namespace, path="drift.md", content=content)
    SearchChunk.objects.filter(document=document, ordinal=2).update(start_line=999)
    SearchTerm.objects.filter(document=document).update(body_tf=1)
    call_command("kb_reindex_search", "--namespace", namespace.slug, stdout=StringIO())
    _assert_index_matches(document, content)


def test_snippet_comes_from_a_match_far_down_a_large_document(http, alice, namespace):
    """Snippets look at a document's opening chunks first; a match beyond them still gets one."""
    rng = random.Random(5)
    paragraphs = _paragraphs(rng, 600)
    paragraphs[-2] += " zanzibar quoll"
    content = "\n\n".join(paragraphs)
    document = services.document_create(actor=alice.actor, namespace=namespace, path="long.md", content=content)
    services.document_create(actor=alice.actor, namespace=namespace, path="short.md", content="zanzibar early\n\nrest")
    assert SearchChunk.objects.filter(document=document).count() > search.BEST_CHUNK_SCAN_ORDINALS
    found = http.as_(alice).get("/kb/search", params={"q": "zanzibar quoll"}).json()
    hits = {hit["document"]["path"]: hit["snippet"] for hit in found["data"]}
    assert set(hits) == {"long.md", "short.md"}
    assert "zanzibar quoll" in hits["long.md"]["text"]
    line = content.split("\n").index(paragraphs[-2]) + 1
    assert hits["long.md"]["start_line"] == line
    assert hits["short.md"]["start_line"] == 1


@pytest.mark.parametrize(
    ("one_pass_share", "first_share"),
    [(0, 2.0), (10_000, 2.0), (10_000, 0.0)],
    ids=["one-gin-pass", "candidate-by-candidate", "gin-pass-first"],
)
def test_phrases_match_the_same_documents_either_way_they_are_checked(
    http, alice, namespace, monkeypatch, one_pass_share, first_share
):
    """PostgreSQL checks a phrase's candidates one by one or with one pass over the GIN index,
    depending on how many there are, or (for a scope of most of the workspace) takes the GIN
    pass first; each finds exactly the documents with the words in order."""
    monkeypatch.setattr(search, "PHRASE_ONE_PASS_SHARE", one_pass_share)
    monkeypatch.setattr(search, "PHRASE_FIRST_SHARE", first_share)
    rng = random.Random(8)
    expected = set()
    for i in range(12):
        filler = _paragraphs(rng, 3)
        if i % 3 == 0:
            filler[1] += " walrus opal"  # the phrase, not always in the first chunk
            expected.add(f"p{i}.md")
        else:
            filler[0] += " opal"
            filler[2] += " walrus"
        services.document_create(actor=alice.actor, namespace=namespace, path=f"p{i}.md", content="\n\n".join(filler))
    found = http.as_(alice).get("/kb/search", params={"q": '"walrus opal"', "limit": 100}).json()
    assert {hit["document"]["path"] for hit in found["data"]} == expected
    assert found["total"] == len(expected)
    if connection.vendor == "postgresql":  # english stop words drop out: the phrase is one word
        found = http.as_(alice).get("/kb/search", params={"q": '"the opal"', "limit": 100}).json()
        assert found["total"] == 12


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's tsvector column")
@pytest.mark.parametrize("split_from", [4, 10_000], ids=["vectors-computed-beside", "vectors-computed-inline"])
def test_chunk_vectors_match_their_text_however_they_are_computed(alice, namespace, monkeypatch, split_from):
    """A large write computes half of its tsvectors on a second connection; every row's vector
    must still be exactly what its own title, path and text give, and searchable."""
    monkeypatch.setattr(search, "SPLIT_VECTOR_CHUNKS", split_from)
    rng = random.Random(7)
    content = "\n\n".join(_paragraphs(rng, 40)) + "\n\nthe last paragraph names a zanzibarite.\n"
    document = services.document_create(actor=alice.actor, namespace=namespace, path="split.md", content=content)
    expected = search.CHUNK_VECTOR.format(title="c.title", path="c.path_text", text="c.text")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), count(*) FILTER (WHERE c.search_vector = {expected}) "
            "FROM knowledge_searchchunk c WHERE c.document_id = %s",
            [document.pk],
        )
        rows, matching = cursor.fetchone()
    assert rows == len(chunk_lines(content)) + 1 >= 8  # header + body chunks, split into two inserts at 4
    assert matching == rows
    _assert_index_matches(document, content)
    hits = search.run_search(
        query=search_query.parse_query("zanzibarite"),
        scope_sql="SELECT id FROM knowledge_document",
        scope_params=[],
        limit=5,
        offset=0,
    )
    assert [hit.document_id for hit in hits.ranked] == [document.pk]


def _ranking(actor, q: str, *, scope_share: float = 1.0) -> tuple[int, list[tuple[str, int, float]]]:
    from knowledge import selectors

    documents = selectors.document_list(actor=actor, filters=selectors.DocumentFilters())
    scope_sql, scope_params = selectors.search_scope(documents)
    result = search.run_search(
        query=search_query.parse_query(q),
        scope_sql=scope_sql,
        scope_params=scope_params,
        limit=50,
        offset=0,
        scope_share=scope_share,
    )
    return result.total, [(str(r.document_id), r.coverage, round(r.score, 9)) for r in result.ranked]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's stems")
def test_stems_are_looked_up_once(alice, namespace, monkeypatch):
    """A word's stems are asked of PostgreSQL once per process."""
    from django.test.utils import CaptureQueriesContext

    rng = random.Random(3)
    for i in range(15):
        services.document_create(
            actor=alice.actor, namespace=namespace, path=f"r{i}.md", content="\n\n".join(_paragraphs(rng, 2))
        )
    monkeypatch.setattr(search, "_STEMS", {})
    with CaptureQueriesContext(connection) as first:
        counted = _ranking(alice.actor, "kernel ledgers")
    stemming = "to_tsvector('english', w.word)"
    assert counted[0] > 0 and any(stemming in q["sql"] for q in first.captured_queries)
    assert search._STEMS == {"kernel": ("kernel",), "ledgers": ("ledger",)}
    with CaptureQueriesContext(connection) as again:
        assert _ranking(alice.actor, "kernel ledgers") == counted
    assert not any(stemming in q["sql"] for q in again.captured_queries)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL plans phrases by the scope's share")
def test_a_broad_scope_ranks_phrases_exactly_as_a_narrow_one(alice, namespace):
    """Taking the GIN pass first (a scope of most of the workspace) changes how the phrase's
    documents are found, not which ones or their scores; nor does filtering by the scope later."""
    rng = random.Random(11)
    for i in range(20):
        paragraphs = _paragraphs(rng, 3)
        if i % 4 == 0:
            paragraphs[i % 3] += " walrus opal"  # the phrase, at varying depths
        else:
            paragraphs[0] += " opal"
            paragraphs[i % 3] += " walrus"  # both words, apart
        document = services.document_create(
            actor=alice.actor, namespace=namespace, path=f"b{i}.md", content="\n\n".join(paragraphs)
        )
    archived = str(document.pk)  # matches every query below, but is outside the (active) scope
    services.document_set_archived(actor=alice.actor, document_id=document.pk, archived=True)
    # Several clauses or a prefix: a broad scope also filters once, after adding up, not per term row.
    for q in (
        '"walrus opal"',
        '"walrus opal" quota',
        '"walrus opal" -zanzibar',
        '"walrus opal" OR zanzibar',
        "walrus opal",
        "walr* kernel",
        "how does walrus relate to quota?",
    ):
        broad = _ranking(alice.actor, q, scope_share=1.0)
        assert broad == _ranking(alice.actor, q, scope_share=0.0), q
        assert broad[0] > 0 and archived not in {document_id for document_id, _, _ in broad[1]}, q


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner estimate of the row count")
def test_an_estimated_document_count_ranks_like_the_exact_one_and_never_goes_negative(alice, namespace, monkeypatch):
    """Past ESTIMATED_COUNT_FROM documents BM25 takes the planner's row count instead of counting.
    Right after ANALYZE the estimate is exact, so the ranking is the same; when the table has grown
    past the estimate, a word in more documents than it still weighs more than nothing."""
    rng = random.Random(5)
    for i in range(12):
        extra = " kernel" * (i % 4)
        services.document_create(
            actor=alice.actor, namespace=namespace, path=f"e{i}.md", content="\n\n".join(_paragraphs(rng, 2)) + extra
        )
    exact = _ranking(alice.actor, "kernel quota")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_document")
    monkeypatch.setattr(search, "ESTIMATED_COUNT_FROM", 1)
    assert _ranking(alice.actor, "kernel quota") == exact

    for i in range(30):  # the table grows past its estimate (12), every new document with the word
        services.document_create(actor=alice.actor, namespace=namespace, path=f"g{i}.md", content="kernel " * (1 + i))
    total, ranked = _ranking(alice.actor, "kernel")
    assert total == 42 and all(score > 0 for _, _, score in ranked)
    assert ranked[0][0] == str(Document.objects.get(path="g29.md").pk)  # most occurrences first
