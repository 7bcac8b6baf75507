"""Document and version admin: scoped to owned namespaces, read-only, archive through services."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from knowledge.models import Document, DocumentVersion
from knowledge.services import document_create, document_revise, document_set_archived, document_update
from workspaces.services import namespace_create, user_ensure

pytestmark = pytest.mark.django_db

DOCUMENTS = "admin:knowledge_document_changelist"
VERSIONS = "admin:knowledge_documentversion_changelist"


def login(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def change_url(obj: Any) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


def listed(client: Client, url_name: str) -> set[Any]:
    response = client.get(reverse(url_name))
    assert response.status_code == 200
    return {obj.pk for obj in response.context["cl"].result_list}


def message_texts(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def docs(alice, bob) -> dict[str, Document]:
    alice.user.is_staff = True
    alice.user.save()
    mine = namespace_create(actor=alice.actor, slug="alice-ns")
    theirs = namespace_create(actor=bob.actor, slug="bob-ns")
    return {
        "alice": document_create(actor=alice.actor, namespace=mine, path="notes/a.md", content="# A\n\nalpha"),
        "bob": document_create(actor=bob.actor, namespace=theirs, path="b.md", content="# B\n\nbravo"),
    }


def test_superuser_sees_all_documents(docs):
    root = user_ensure(username="root", is_staff=True, is_superuser=True)
    assert listed(login(root), DOCUMENTS) == {docs["alice"].pk, docs["bob"].pk}


def test_staff_sees_documents_of_owned_namespaces_only(alice, docs):
    client = login(alice.user)
    assert listed(client, DOCUMENTS) == {docs["alice"].pk}
    assert client.get(change_url(docs["alice"])).status_code == 200
    assert client.get(change_url(docs["bob"])).status_code in (403, 404)
    assert b"bob-ns" not in client.get(reverse(DOCUMENTS)).content


def test_search_by_path_and_title(alice, docs):
    client = login(alice.user)
    response = client.get(reverse(DOCUMENTS), {"q": "notes"})
    assert {d.pk for d in response.context["cl"].result_list} == {docs["alice"].pk}
    response = client.get(reverse(DOCUMENTS), {"q": "nothing-like-this"})
    assert list(response.context["cl"].result_list) == []


def test_document_admin_is_read_only(alice, docs):
    client = login(alice.user)
    document = docs["alice"]
    page = client.get(change_url(document)).content.decode()
    assert 'name="_save"' not in page
    assert client.post(change_url(document), {"title": "Hacked"}).status_code == 403
    assert client.get(reverse("admin:knowledge_document_add")).status_code == 403
    assert client.get(reverse("admin:knowledge_document_delete", args=[document.pk])).status_code == 403
    assert "delete_selected" not in client.get(reverse(DOCUMENTS)).content.decode()
    document.refresh_from_db()
    assert document.title == "A"


def test_archive_and_restore_documents(alice, docs):
    client = login(alice.user)
    document = docs["alice"]
    body = {"action": "archive_documents", "_selected_action": [str(document.pk)]}
    assert client.post(reverse(DOCUMENTS), body).status_code == 302
    document.refresh_from_db()
    assert document.archived
    versions = DocumentVersion.objects.filter(document=document).count()
    assert client.post(reverse(DOCUMENTS), {**body, "action": "restore_documents"}).status_code == 302
    document.refresh_from_db()
    assert not document.archived
    assert DocumentVersion.objects.filter(document=document).count() == versions  # restore adds no version


def test_restore_reports_path_taken(alice, docs):
    document = docs["alice"]
    other = document_create(actor=alice.actor, namespace=document.namespace, path="other.md", content="other")
    document_set_archived(actor=alice.actor, document_id=document.pk, archived=True)
    document_update(actor=alice.actor, document_id=other.pk, changes={"path": document.path})
    response = login(alice.user).post(
        reverse(DOCUMENTS), {"action": "restore_documents", "_selected_action": [str(document.pk)]}
    )
    assert response.status_code == 302
    assert any("path_taken" in text and "notes/a.md" in text for text in message_texts(response))
    document.refresh_from_db()
    assert document.archived


def test_versions_scoped_and_read_only(alice, docs):
    document = docs["alice"]
    document_revise(actor=alice.actor, document_id=document.pk, content="# A\n\n" + "long text " * 1000)
    client = login(alice.user)
    mine = set(DocumentVersion.objects.filter(document=document).values_list("pk", flat=True))
    assert listed(client, VERSIONS) == mine
    version = DocumentVersion.objects.get(document=document, number=2)

    response = client.get(change_url(version))
    assert response.status_code == 200
    page = response.content.decode()
    assert 'name="_save"' not in page
    assert "long text" in page and "…" in page  # truncated preview
    assert page.count("long text") < 1000

    assert client.post(change_url(version), {"change_summary": "x"}).status_code == 403
    assert client.get(reverse("admin:knowledge_documentversion_add")).status_code == 403
    assert client.get(reverse("admin:knowledge_documentversion_delete", args=[version.pk])).status_code == 403
    bob_version = docs["bob"].current_version
    assert client.get(change_url(bob_version)).status_code in (403, 404)


def test_document_page_shows_version_history(alice, docs):
    document = docs["alice"]
    document_revise(actor=alice.actor, document_id=document.pk, content="# A\n\nsecond", change_summary="second take")
    page = login(alice.user).get(change_url(document)).content.decode()
    assert "second take" in page
    assert change_url(document.versions.get(number=1)) in page
