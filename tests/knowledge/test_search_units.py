"""Query parsing and chunking (pure functions)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from hypothesis import given, settings
from hypothesis import strategies as st

from knowledge.models import SearchChunk
from knowledge.search import chunk_lines, make_snippet
from knowledge.search_query import parse_query


def test_plain_words_are_relaxed_without_stopwords():
    parsed = parse_query("How do I reset my password?")
    assert parsed.relaxed
    assert [c.alternatives[0].words for c in parsed.clauses] == [("reset",), ("password",)]


def test_operators_make_the_query_strict():
    assert not parse_query('"exact phrase" words').relaxed
    assert not parse_query("a OR b").relaxed
    assert not parse_query("a -b").relaxed
    assert not parse_query("pre* word").relaxed
    parsed = parse_query("alpha OR beta gamma -delta")
    assert [len(c.alternatives) for c in parsed.clauses] == [2, 1]
    assert parsed.excluded[0].alternatives[0].words == ("delta",)


def test_a_minus_before_quotes_excludes_the_phrase():
    parsed = parse_query('walrus -"walrus opal" -"open')
    assert [c.alternatives[0].words for c in parsed.clauses] == [("walrus",)]
    assert [c.alternatives[0].words for c in parsed.excluded] == [("walrus", "opal"), ("open",)]
    assert parse_query('well-"known"').clauses[0].alternatives[0].words == ("well", "known")


def test_stray_operators_become_text():
    assert parse_query("OR").clauses[0].alternatives[0].words == ("or",)
    assert parse_query("-only").clauses[0].alternatives[0].words == ("only",)
    assert parse_query("-").is_empty
    assert parse_query('"open').clauses[0].alternatives[0].words == ("open",)


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(max_size=200))
def test_parser_never_raises_and_emits_only_word_characters(text):
    parsed = parse_query(text)
    for clause in parsed.clauses + parsed.excluded:
        for term in clause.alternatives:
            assert term.words and all(w.isalnum() or "_" in w for w in term.words)


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\r\n"), max_size=400), max_size=60))
def test_chunks_cover_every_line_in_order(lines):
    content = "\n".join(lines)
    chunks = chunk_lines(content)
    rebuilt = "".join(text for _, _, text in chunks).replace("\n", "")
    assert rebuilt == content.replace("\n", "") or not content.strip()
    for start, end, _ in chunks:
        assert 1 <= start <= end <= max(len(lines), 1)
    assert [c[0] for c in chunks] == sorted(c[0] for c in chunks)


def test_snippet_starts_at_the_first_matching_line():
    text = "intro\nnothing here\nthe certificate expired\nafter\nmore"
    snippet = make_snippet(text, 10, ["certificate"], 2)
    assert snippet == {"text": "the certificate expired\nafter\n…", "start_line": 12, "end_line": 13}


@pytest.mark.django_db
def test_reindex_command_rebuilds_chunks(alice):
    from knowledge.services import document_create
    from workspaces.services import namespace_create

    namespace = namespace_create(actor=alice.actor, slug="re")
    doc = document_create(actor=alice.actor, namespace=namespace, path="a.md", content="line\n" * 2000)
    expected = SearchChunk.objects.filter(document=doc).count()
    SearchChunk.objects.filter(document=doc).delete()
    out = StringIO()
    call_command("kb_reindex_search", "--namespace", "re", stdout=out)
    assert "Indexed 1 documents." in out.getvalue()
    assert SearchChunk.objects.filter(document=doc).count() == expected > 2
