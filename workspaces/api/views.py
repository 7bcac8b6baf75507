"""Workspace-level API: the semantic search policy (workspace admins only)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.exceptions import Invalid
from workspaces import semantic


class ChunkingSerializer(serializers.Serializer):
    target_tokens = serializers.IntegerField()
    max_tokens = serializers.IntegerField()
    overlap_tokens = serializers.IntegerField()
    min_tokens = serializers.IntegerField()


class IndexingSerializer(serializers.Serializer):
    paused = serializers.BooleanField()
    batch_size = serializers.IntegerField()


class SemanticPolicySerializer(serializers.Serializer):
    enabled = serializers.BooleanField()
    provider = serializers.CharField()
    model = serializers.CharField()
    dimensions = serializers.IntegerField()
    base_url = serializers.CharField(allow_null=True)
    api_key_configured = serializers.BooleanField()
    generation = serializers.IntegerField()
    unavailable_reason = serializers.CharField(allow_null=True)
    chunking = ChunkingSerializer()
    indexing = IndexingSerializer()


class SemanticPolicyPatchSerializer(serializers.Serializer):
    """Documentation only: the body is validated strictly by workspaces.semantic."""

    enabled = serializers.BooleanField(required=False, allow_null=True)
    provider = serializers.CharField(required=False, allow_null=True)
    model = serializers.CharField(required=False, allow_null=True)
    dimensions = serializers.IntegerField(required=False, allow_null=True)
    base_url = serializers.CharField(required=False, allow_null=True)
    api_key = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        write_only=True,
        help_text="Blank keeps the stored key; null removes it. Never returned.",
    )
    chunking = serializers.DictField(required=False, allow_null=True)
    indexing = serializers.DictField(required=False, allow_null=True)


ERROR = OpenApiResponse(description="Error {detail, code}")


class SemanticPolicyView(APIView):
    """GET or PATCH the workspace's semantic search policy."""

    @extend_schema(responses={200: SemanticPolicySerializer, 401: ERROR, 403: ERROR})
    def get(self, request: Request) -> Response:
        return Response(semantic.policy_get(actor=request.actor))

    @extend_schema(
        request=SemanticPolicyPatchSerializer,
        responses={200: SemanticPolicySerializer, 400: ERROR, 401: ERROR, 403: ERROR},
    )
    def patch(self, request: Request) -> Response:
        body = request.data if isinstance(request.data, dict) else None
        if body is None:
            raise Invalid("The body must be a JSON object.", code="invalid")
        return Response(semantic.policy_update(actor=request.actor, patch=dict(body)))
