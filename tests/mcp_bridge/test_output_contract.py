"""The bridge's output models against the server's OpenAPI components.

The bridge cannot import the server, so its output models restate the API's response shapes;
this test keeps the two from drifting: every field a model publishes for an API object exists
there, with the same JSON type, and a field the model requires is one the API always sends.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.renderers import JSONOpenAPIRenderer

from mcp_bridge import schemas as out

# bridge model -> OpenAPI component it restates
MIRRORS: dict[type[out.Out], str] = {
    out.VersionToken: "VersionToken",
    out.Document: "Document",
    out.Namespace: "Namespace",
    out.Snippet: "Snippet",
    out.SearchHit: "SearchHit",
    out.Version: "Version",
    out.DocumentResult: "DocumentWrite",
    out.WriteResult: "DocumentWrite",
    out.OutlineHeading: "OutlineHeading",
    out.Outline: "DocumentOutline",
    out.LineRange: "LineRange",
    out.Range: "DocumentRange",
    out.ChangedRange: "ChangedRange",
    out.EditResult: "DocumentEditResult",
    out.GraphDocument: "GraphDocument",
    out.GraphEdgeDetail: "GraphEdgeDetail",
    out.LinkResult: "GraphLinkResult",
    out.GraphNeighbor: "GraphNeighbor",
    out.GraphEdge: "GraphEdge",
    out.Neighbors: "GraphNeighbors",
    out.BulkItem: "BulkArchiveResult",
    out.BulkArchiveResult: "BulkArchiveResponse",
    out.TeammateConfig: "TeammateConfig",
    out.MemoryDocument: "MemoryDocument",
    out.TeammateContext: "Context",
    out.Appended: "Appended",
    out.MemoryAppendResult: "MemoryAppendResult",
}
# Fields the bridge itself adds to API objects.
BRIDGE_FIELDS = {"contentTruncation", "hasMore", "nextOffset"}
JSON_TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}


@pytest.fixture(scope="module")
def components() -> dict[str, Any]:
    raw = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(JSONOpenAPIRenderer().render(raw))["components"]["schemas"]


def _api_type(prop: dict[str, Any], components: dict[str, Any]) -> str:
    if "$ref" in prop or "allOf" in prop:
        ref = prop.get("$ref") or prop["allOf"][0]["$ref"]
        target = components[ref.rsplit("/", 1)[-1]]
        return "string" if "enum" in target else "object"
    return prop.get("type", "object")


def _model_type(schema: dict[str, Any]) -> str:
    options = schema.get("anyOf", [schema])
    kinds = {o.get("type", "object") for o in options if o.get("type") != "null"}
    return kinds.pop() if len(kinds) == 1 else "mixed"


@pytest.mark.parametrize("model", list(MIRRORS), ids=lambda m: m.__name__)
def test_published_fields_exist_in_the_api_with_the_same_type(model, components):
    component = components[MIRRORS[model]]
    api_props = component["properties"]
    api_required = set(component.get("required", []))
    schema = model.model_json_schema(ref_template="#/$defs/{model}")
    for name, prop in schema["properties"].items():
        if name in BRIDGE_FIELDS:
            continue
        assert name in api_props, f"{model.__name__}.{name} is not in the API's {MIRRORS[model]}"
        if "$ref" not in prop and "items" not in prop:
            api_kind = JSON_TYPES.get(_api_type(api_props[name], components), "object")
            assert _model_type(prop) in (api_kind, "mixed"), f"{model.__name__}.{name}: {prop} vs {api_props[name]}"
        if name in schema.get("required", []):
            assert name in api_required, f"{model.__name__}.{name} is required here but optional in the API"


def test_every_tool_output_model_is_open_to_new_fields():
    for model in [*MIRRORS, out.NamespaceList, out.SearchResults, out.History, out.Tree, out.Published]:
        assert model.model_config.get("extra") == "allow", model.__name__
