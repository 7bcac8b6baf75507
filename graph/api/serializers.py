"""Graph API serializers: node references in, documents-as-nodes and edges out."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from graph.models import EdgeType
from graph.selectors import DIRECTIONS
from knowledge.api import serializers as ks
from knowledge.models import Document, DocumentKind, DocumentStatus
from workspaces.models import Visibility

EDGE_TYPES = EdgeType.values


def _edge_types(value: str) -> list[str]:
    types = [part.strip() for part in value.split(",") if part.strip()]
    unknown = sorted(set(types) - set(EDGE_TYPES))
    if unknown:
        raise serializers.ValidationError(f"Unknown edge types: {', '.join(unknown)}. Use {', '.join(EDGE_TYPES)}.")
    return list(dict.fromkeys(types))


class EdgeTypesField(ks.TextField):
    """A comma-separated list of edge types (`references,depends_on`); empty means all."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", f"Comma-separated edge types ({', '.join(EDGE_TYPES)}); empty means all.")
        super().__init__(max_length=500, required=False, allow_blank=True, **kwargs)

    def to_internal_value(self, data: Any) -> list[str]:  # type: ignore[override]
        return _edge_types(super().to_internal_value(data))


# --- node references (input) ---------------------------------------------------------------


class GraphNodeRefSerializer(serializers.Serializer):
    """A document: by id, by agor:// URI, or by namespace + path (exactly one form)."""

    document_id = serializers.UUIDField(required=False)
    uri = ks.TextField(max_length=2100, required=False)
    namespace = ks.TextField(max_length=100, required=False)
    path = ks.TextField(max_length=1024, required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        forms = sum(
            (
                "document_id" in attrs,
                "uri" in attrs,
                "namespace" in attrs or "path" in attrs,
            )
        )
        if forms != 1:
            raise serializers.ValidationError("Give exactly one of document_id, uri, or namespace + path.")
        if ("namespace" in attrs) != ("path" in attrs):
            raise serializers.ValidationError("namespace and path go together.")
        return attrs


NODE_REF_SCHEMA = {
    "oneOf": [
        {
            "type": "string",
            "description": "A document id, agor://kb/document/<id> or agor://kb/<namespace>/<path>.",
            "maxLength": 2100,
        },
        {
            "type": "object",
            "description": "Exactly one of document_id, uri, or namespace + path.",
            "properties": {
                "document_id": {"type": "string", "format": "uuid"},
                "uri": {"type": "string", "maxLength": 2100},
                "namespace": {"type": "string", "maxLength": 100},
                "path": {"type": "string", "maxLength": 1024},
            },
        },
    ]
}


@extend_schema_field(NODE_REF_SCHEMA)
class NodeRefField(serializers.Field):
    """A node reference given as a string (id or URI) or as an object."""

    default_error_messages = {"invalid": "Give a document id, an agor://kb/ URI, or an object."}

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, str):
            text = data.strip()
            try:
                data = {"document_id": str(uuid.UUID(text))}
            except ValueError:
                data = {"uri": text}
        if not isinstance(data, dict):
            self.fail("invalid")
        serializer = GraphNodeRefSerializer(data=data)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def to_representation(self, value: Any) -> Any:
        return value


class GraphLinkInputSerializer(serializers.Serializer):
    source = NodeRefField()
    target = NodeRefField()
    edge_type = serializers.ChoiceField(choices=EDGE_TYPES)
    confidence = serializers.FloatField(
        min_value=0, max_value=1, required=False, help_text="0..1; 1 for a new edge when omitted."
    )
    properties = ks.MetadataField(required=False, help_text="Replaces the edge's properties when given.")
    archived = serializers.BooleanField(default=False, help_text="true archives (unlinks) the edge instead.")


class GraphNeighborsQuerySerializer(serializers.Serializer):
    document_id = serializers.UUIDField(required=False)
    uri = ks.TextField(max_length=2100, required=False)
    namespace = ks.TextField(max_length=100, required=False)
    path = ks.TextField(max_length=1024, required=False)
    direction = serializers.ChoiceField(choices=DIRECTIONS, default="both")
    edge_types = EdgeTypesField()
    depth = serializers.IntegerField(min_value=1, max_value=3, default=1)
    limit = serializers.IntegerField(min_value=1, max_value=100, default=50)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        GraphNodeRefSerializer().validate(
            {k: attrs[k] for k in ("document_id", "uri", "namespace", "path") if attrs.get(k) not in (None, "")}
        )
        return attrs


class NamespaceGraphQuerySerializer(serializers.Serializer):
    edge_types = EdgeTypesField()
    limit = serializers.IntegerField(min_value=1, max_value=2000, default=500)


class DocumentLinksQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=500, default=100, help_text="Per list.")


# --- output --------------------------------------------------------------------------------


class GraphDocumentSerializer(serializers.Serializer):
    """A document as a graph node."""

    document_id = serializers.UUIDField(source="id")
    reference_uri = serializers.CharField()
    uri = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()
    namespace = serializers.CharField(source="namespace.slug")
    path = serializers.CharField()
    title = serializers.CharField()
    icon = serializers.CharField()
    kind = serializers.ChoiceField(choices=DocumentKind.values)
    status = serializers.ChoiceField(choices=DocumentStatus.values)
    visibility = serializers.ChoiceField(choices=Visibility.values)
    archived = serializers.BooleanField()

    def get_uri(self, document: Document) -> str:
        return f"agor://kb/{document.namespace.slug}/{document.path}"

    def get_url(self, document: Document) -> str:
        return ks.reader_url(self.context.get("request"), document.namespace.slug, document.path)


class GraphNeighborSerializer(GraphDocumentSerializer):
    depth = serializers.IntegerField(help_text="Hops from the center (1..3).")


class GraphEdgeSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    source = serializers.UUIDField(help_text="Source document id.")
    target = serializers.UUIDField(help_text="Target document id.")
    edge_type = serializers.ChoiceField(choices=EDGE_TYPES)
    confidence = serializers.FloatField()
    properties = serializers.DictField()


class GraphNeighborsSerializer(serializers.Serializer):
    center = GraphDocumentSerializer()
    nodes = GraphNeighborSerializer(many=True, help_text="Neighbours (the center is not repeated here).")
    edges = GraphEdgeSerializer(many=True, help_text="Active edges among the center and the nodes.")
    truncated = serializers.BooleanField(help_text="The node limit (or the edge cap) cut the walk short.")


class NamespaceGraphSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    nodes = GraphDocumentSerializer(many=True)
    edges = GraphEdgeSerializer(many=True)
    truncated = serializers.BooleanField()


class GraphLinkedSerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="Edge id.")
    edge_type = serializers.ChoiceField(choices=EDGE_TYPES)
    confidence = serializers.FloatField()
    properties = serializers.DictField()
    document = GraphDocumentSerializer()


class GraphUnresolvedSerializer(serializers.Serializer):
    href = serializers.CharField(help_text="The destination as written.")
    reason = serializers.CharField(help_text="not_found (missing or not visible), archived, or invalid.")
    detail = serializers.CharField(help_text="Why an invalid link cannot name a document.")
    fragment = serializers.CharField()


class DocumentLinksSerializer(serializers.Serializer):
    outgoing = GraphLinkedSerializer(many=True)
    backlinks = GraphLinkedSerializer(many=True)
    unresolved = GraphUnresolvedSerializer(many=True)
    truncated = serializers.BooleanField()


class GraphEdgeDetailSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    source = GraphDocumentSerializer(source="source.document")
    target = GraphDocumentSerializer(source="target.document")
    edge_type = serializers.ChoiceField(choices=EDGE_TYPES)
    confidence = serializers.FloatField()
    properties = serializers.DictField()
    archived = serializers.BooleanField()
    archived_at = serializers.DateTimeField(allow_null=True)
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class GraphLinkResultSerializer(serializers.Serializer):
    edge = GraphEdgeDetailSerializer()
    created = serializers.BooleanField()
    changed = serializers.BooleanField()
