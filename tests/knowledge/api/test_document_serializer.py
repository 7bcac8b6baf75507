"""DocumentSerializer renders documents directly; the result must equal DRF's generic rendering."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import RequestFactory, override_settings
from rest_framework import serializers

from knowledge import services
from knowledge.api.serializers import DocumentSerializer
from knowledge.models import Document
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db


def _generic(document: Document, context: dict) -> dict:
    """What DRF's field-by-field Serializer.to_representation makes of the declared fields."""
    return dict(serializers.Serializer.to_representation(DocumentSerializer(context=context), document))


@pytest.fixture
def documents(alice, bob):
    namespace = namespace_create(actor=alice.actor, slug="eng", display_name="Eng")
    services.document_create(actor=alice.actor, namespace=namespace, path="a b/ü.md", content="# Ü\n")
    rich = services.document_create(
        actor=alice.actor,
        namespace=namespace,
        path="notes/rich.md",
        content="body",
        title="Rich [title]",
        icon="🚀",
        kind="decision",
        visibility="private",
        status="draft",
        edit_policy="admins",
        metadata={"tags": ["x", 1], "nested": {"a": None}, "n": 2.5},
    )
    services.document_revise(actor=alice.actor, document_id=rich.pk, content="body 2", expected_version=1)
    services.document_set_archived(actor=alice.actor, document_id=rich.pk, archived=True)
    orphan = services.document_create(actor=alice.actor, namespace=namespace, path="orphan.md", content="x")
    Document.objects.filter(pk=orphan.pk).update(created_by=None, updated_by=None)
    return list(
        Document.objects.filter(namespace=namespace).select_related(
            "namespace", "current_version", "created_by", "updated_by"
        )
    )


@pytest.mark.parametrize("include_content", [False, True])
def test_direct_rendering_equals_drf_fields(documents, include_content):
    request = RequestFactory().get("/kb/documents", HTTP_HOST="testserver")
    context = {"request": request, "include_content": include_content}
    rendered = DocumentSerializer(documents, many=True, context=context).data
    assert len(rendered) == 3
    for document, data in zip(documents, rendered, strict=True):
        expected = _generic(document, {"request": request})
        if include_content:
            expected["content"] = document.current_version.content
        assert data == expected
        assert list(data) == list(expected)  # same key order as the declared fields
    archived = next(d for d in rendered if d["path"] == "notes/rich.md")
    assert archived["archived"] is True and archived["archived_at"].endswith("Z")
    assert archived["current_version"]["number"] == 2
    assert archived["url"] == "http://testserver/ui/kb/eng/notes/rich.md"
    assert next(d for d in rendered if d["path"] == "orphan.md")["created_by"] is None


@override_settings(KNOWLEDGE_PUBLIC_URL="https://kb.example.org/", TIME_ZONE="Europe/Paris")
def test_public_url_and_timestamps_follow_settings(documents):
    document = documents[0]
    data = DocumentSerializer(document, context={"request": None}).data
    assert data == _generic(document, {"request": None})
    assert data["url"].startswith("https://kb.example.org/ui/kb/eng/")
    stamp = dt.datetime.fromisoformat(data["created_at"])
    assert stamp == document.created_at


@pytest.mark.parametrize("include_content", [False, True])
def test_listed_rows_render_exactly_like_models(documents, bob, include_content):
    """List and search pages read plain values (`selectors.listed`), not models: same output,
    including a missing author, another editor, an archived draft with metadata, and content."""
    from knowledge import selectors

    Document.objects.filter(pk=documents[0].pk).update(updated_by=bob.user)
    request = RequestFactory().get("/kb/documents", HTTP_HOST="testserver")
    context = {"request": request, "include_content": include_content}
    models = Document.objects.filter(pk__in=[d.pk for d in documents]).select_related(
        "namespace", "current_version", "created_by", "updated_by"
    )
    by_id = {document.pk: document for document in models}
    assert {document["updated_by"] for document in DocumentSerializer(models, many=True).data} == {"alice", "bob", None}
    rows = selectors.listed(Document.objects.filter(pk__in=by_id), include_content=include_content)
    assert len(rows) == 3
    for row in rows:
        assert isinstance(row, selectors.ListedDocument)
        assert DocumentSerializer(row, context=context).data == DocumentSerializer(by_id[row.pk], context=context).data
