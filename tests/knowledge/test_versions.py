"""Versions are immutable in the model layer and have no write endpoints."""

from __future__ import annotations

import pytest
from django.db import connection

from knowledge.models import DocumentVersion, ImmutableVersionError
from knowledge.services import document_create
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db


def test_versions_cannot_be_changed_or_deleted(alice):
    namespace = namespace_create(actor=alice.actor, slug="imm")
    doc = document_create(actor=alice.actor, namespace=namespace, path="a.md", content="original")
    version = DocumentVersion.objects.get(document=doc)
    version.content = "tampered"
    with pytest.raises(ImmutableVersionError):
        version.save()
    with pytest.raises(ImmutableVersionError):
        DocumentVersion.objects.filter(pk=version.pk).update(content="tampered")
    with pytest.raises(ImmutableVersionError):
        version.delete()
    assert DocumentVersion.objects.get(pk=version.pk).content == "original"


def test_version_endpoints_are_read_only(alice):
    from rest_framework.test import APIClient

    namespace = namespace_create(actor=alice.actor, slug="imm2")
    doc = document_create(actor=alice.actor, namespace=namespace, path="a.md", content="original")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.token}")
    for method in ("put", "patch", "delete", "post"):
        response = getattr(client, method)(f"/kb/documents/{doc.pk}/versions/1", {"content": "x"}, format="json")
        assert response.status_code == 405, method
    assert DocumentVersion.objects.get(document=doc).content == "original"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL storage setting")
def test_large_bodies_are_stored_uncompressed_and_read_back_whole(alice):
    namespace = namespace_create(actor=alice.actor, slug="big")
    body = "# Big\n\n" + "the same sentence again and again, very compressible.\n" * 20_000  # ~1 MiB
    doc = document_create(actor=alice.actor, namespace=namespace, path="big.md", content=body)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_size(content), octet_length(content) "
            "FROM knowledge_documentversion WHERE document_id = %s",
            [doc.pk],
        )
        stored, length = cursor.fetchone()
    assert stored >= length == len(body.encode())  # compressed, this body would take a few KB
    assert DocumentVersion.objects.get(document=doc).content == body
