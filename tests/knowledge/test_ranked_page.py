"""`selectors.ranked_page` loads a ranked page's documents by id, as lists load them (plain
`listed` rows, content only on request), and never reaches outside the caller's workspace."""

from __future__ import annotations

import pytest

from knowledge import selectors
from knowledge.models import Document
from knowledge.services import document_create
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db


def test_a_ranked_page_loads_its_documents_within_the_workspace(make_member, other_workspace):
    member = make_member("member")
    outsider = make_member("owner", workspace_=other_workspace)
    ours = namespace_create(actor=member.actor, slug="ours")
    theirs = namespace_create(actor=outsider.actor, slug="theirs")
    mine = document_create(actor=member.actor, namespace=ours, path="a.md", content="# A\n\nBody.\n")
    foreign = document_create(actor=outsider.actor, namespace=theirs, path="b.md", content="# B\n")

    page = selectors.ranked_page(actor=member.actor, document_ids=[mine.pk, foreign.pk])
    assert list(page) == [mine.pk]  # the other workspace's id is not loaded
    document = page[mine.pk]
    assert (document.namespace.slug, document.current_version.number, document.created_by.username) == (
        "ours",
        1,
        member.user.username,
    )
    assert isinstance(document, selectors.ListedDocument) and document.current_version.content is None
    full = selectors.ranked_page(actor=member.actor, document_ids=[mine.pk], include_content=True)[mine.pk]
    assert full.current_version.content == "# A\n\nBody.\n"
    assert selectors.ranked_page(actor=member.actor, document_ids=[]) == {}


def test_ranked_rows_equal_the_rows_lists_load(make_member):
    """On PostgreSQL a ranked page runs its own precompiled statement: the rows must be exactly the
    ones `listed` builds for the same documents (metadata decoded, content only when asked)."""
    member = make_member("member")
    ours = namespace_create(actor=member.actor, slug="ours")
    documents = [
        document_create(
            actor=member.actor,
            namespace=ours,
            path=f"d{i}.md",
            content=f"# Doc {i}\n\nBody {i}.\n",
            metadata={"team": "search", "tags": ["a", "ü"], "depth": {"n": i}} if i % 2 else {},
        )
        for i in range(3)
    ]
    ids = [document.pk for document in documents]
    for include_content in (False, True):
        expected = selectors.listed(Document.objects.filter(pk__in=ids), include_content=include_content)
        page = selectors.ranked_page(actor=member.actor, document_ids=ids, include_content=include_content)
        assert page == {row.id: row for row in expected}
        assert page[ids[1]].metadata["depth"] == {"n": 1}
