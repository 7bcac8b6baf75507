"""`selectors.document_get` reads by key through a statement compiled once, then applies the
per-document access rule: it must return what the ORM's select_related query returns, and
answer NotFound for everything the read filter would have left out."""

from __future__ import annotations

from uuid import uuid4

import pytest

from config.exceptions import NotFound
from knowledge import selectors
from knowledge.models import Document
from knowledge.services import document_create, namespace_set_archived
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db


def test_a_document_by_id_equals_the_orm_read(alice, bob):
    ns = namespace_create(actor=alice.actor, slug="eng", others_can="read")
    created = document_create(
        actor=alice.actor, namespace=ns, path="a.md", content="# A\n\nBody.\n", metadata={"team": "search", "n": [1]}
    )
    relations = ("namespace", "current_version", "created_by", "updated_by")
    for include_content in (False, True):
        expected = Document.objects.select_related(*relations).get(pk=created.pk)
        found = selectors.document_get(actor=bob.actor, document_id=str(created.pk), include_content=include_content)
        fields = [field.attname for field in Document._meta.concrete_fields]
        assert [getattr(found, name) for name in fields] == [getattr(expected, name) for name in fields]
        assert found.namespace.slug == "eng" and found.created_by.username == alice.user.username
        assert found.updated_by.username == alice.user.username and found.current_version.number == 1
        assert all(Document._meta.get_field(name).is_cached(found) for name in relations)  # no query later
        assert ("content" in found.current_version.get_deferred_fields()) is not include_content
        if include_content:
            assert found.current_version.content == "# A\n\nBody.\n"


def test_what_the_reader_may_not_see_is_not_found(alice, bob, make_member, other_workspace):
    ns = namespace_create(actor=alice.actor, slug="eng", others_can="read")
    private = document_create(actor=alice.actor, namespace=ns, path="p.md", content="# P\n", visibility="private")
    closed = namespace_create(actor=alice.actor, slug="closed")
    hidden = document_create(actor=alice.actor, namespace=closed, path="h.md", content="# H\n")
    outsider = make_member("owner", workspace_=other_workspace)
    archived_ns = namespace_create(actor=alice.actor, slug="old", others_can="read")
    in_archive = document_create(actor=alice.actor, namespace=archived_ns, path="o.md", content="# O\n")
    namespace_set_archived(actor=alice.actor, namespace=archived_ns, archived=True)

    assert selectors.document_get(actor=alice.actor, document_id=private.pk).pk == private.pk
    for actor, document_id in [
        (bob.actor, private.pk),  # private, someone else's
        (bob.actor, hidden.pk),  # a namespace bob cannot read
        (outsider.actor, private.pk),  # another workspace
        (bob.actor, in_archive.pk),  # an archived namespace
        (bob.actor, uuid4()),  # no such document
        (bob.actor, "not-a-uuid"),
    ]:
        with pytest.raises(NotFound):
            selectors.document_get(actor=actor, document_id=document_id)
