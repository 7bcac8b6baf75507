"""Property-based checks of the live API against its own OpenAPI schema (schemathesis).

Every operation gets a bounded number of generated requests, valid and invalid; no response
may be a 5xx or contradict the schema (status code, content type, body shape).
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from rest_framework.renderers import JSONOpenAPIRenderer
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from knowledge.models import EmbeddingChunk
from knowledge.services import document_create
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db(transaction=True)


def _schema() -> dict:
    raw = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(JSONOpenAPIRenderer().render(raw))


schema = schemathesis.openapi.from_dict(_schema())

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture
def seeded(alice):
    namespace = namespace_create(actor=alice.actor, slug="eng", others_can="read")
    document_create(actor=alice.actor, namespace=namespace, path="guides/setup.md", content="# Setup\n")
    return alice


@schema.parametrize()
@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case, live_server, seeded):
    case.call_and_validate(base_url=live_server.url, headers=seeded.headers, checks=CHECKS)


def test_indexing_status_schema_declares_every_field_the_endpoint_returns(http, make_member):
    components = _schema()["components"]["schemas"]
    declared = components["IndexingStatus"]
    unsynced = declared["properties"]["unsynced_documents"]
    assert unsynced["type"] == "integer" and unsynced["description"]
    assert "unsynced_documents" in declared["required"]
    assert components["Reindex"]["properties"]["status"]["$ref"].endswith("/IndexingStatus")
    admin = make_member("admin")
    namespace = namespace_create(actor=admin.actor, slug="eng")
    document = document_create(actor=admin.actor, namespace=namespace, path="a.md", content="# A\n\nWords.\n")
    EmbeddingChunk.objects.filter(document=document).delete()  # as if its chunk sync had failed

    response = http.as_(admin).get("/kb/settings/semantic/status")

    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == set(declared["properties"])
    assert body["unsynced_documents"] == 1
