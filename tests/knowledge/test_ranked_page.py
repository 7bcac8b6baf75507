"""`selectors.ranked_page` loads a ranked page's documents by id, as lists load them (plain
`listed` rows, content only on request), and never reaches outside the caller's workspace."""

from __future__ import annotations

import pytest

from knowledge import selectors
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
