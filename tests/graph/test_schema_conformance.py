"""Real graph answers (populated, not just errors) match the published OpenAPI schema."""

from __future__ import annotations

import json

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from rest_framework.renderers import JSONOpenAPIRenderer

from tests.conftest import create_document, create_namespace
from tests.graph.conftest import link, revise

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def schema():
    raw = SchemaGenerator().get_schema(request=None, public=True)
    return schemathesis.openapi.from_dict(json.loads(JSONOpenAPIRenderer().render(raw)))


def test_graph_responses_conform(http, alice, bob, schema):
    create_namespace(http, alice, "eng", others_can="read")
    a = create_document(http, alice, "eng", "a.md", "# A\n\n[b](b.md#x) [missing](nope.md) [bad](../../x)")["id"]
    b = create_document(http, alice, "eng", "b.md", "# B\n\n[a](a.md)")["id"]
    revise(http, alice, a, "# A\n\n[b](b.md#x) [missing](nope.md) [bad](../../x)\n")
    client = http.as_(alice)
    checks = [
        ("/kb/graph/neighbors", "GET", client.get("/kb/graph/neighbors", params={"document_id": a, "depth": 2})),
        ("/kb/graph/neighbors", "GET", client.get("/kb/graph/neighbors", params={"depth": 9})),
        ("/kb/namespaces/{slug}/graph", "GET", client.get("/kb/namespaces/eng/graph")),
        ("/kb/documents/{id}/links", "GET", client.get(f"/kb/documents/{a}/links")),
        ("/kb/graph/links", "POST", link(http, alice, a, b, "depends_on", properties={"k": [1, 2]})),
        ("/kb/graph/links", "POST", link(http, alice, a, b, "depends_on")),
        ("/kb/graph/links", "POST", link(http, bob, a, b, "depends_on")),
        ("/kb/graph/links", "POST", link(http, alice, a, a, "depends_on")),
    ]
    edge_id = checks[4][2].json()["edge"]["id"]
    checks.append(("/kb/graph/links/{edge_id}", "DELETE", client.delete(f"/kb/graph/links/{edge_id}")))
    checks.append(("/kb/graph/links/{edge_id}", "DELETE", http.as_(bob).delete(f"/kb/graph/links/{edge_id}")))
    statuses = []
    for path, method, response in checks:
        schema[path][method].validate_response(response)
        statuses.append(response.status_code)
    assert statuses == [200, 400, 200, 200, 201, 200, 403, 400, 200, 403]
