"""Workspace admins: embedding index status and reindex."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.exceptions import PermissionDenied
from knowledge.embeddings import pipeline
from workspaces.access import Actor

ERROR = OpenApiResponse(description="Error {detail, code}")


class ChunkCountsSerializer(serializers.Serializer):
    pending = serializers.IntegerField()
    claimed = serializers.IntegerField()
    embedded = serializers.IntegerField()
    failed = serializers.IntegerField()


class IndexingStatusSerializer(serializers.Serializer):
    enabled = serializers.BooleanField()
    configured = serializers.BooleanField(help_text="A provider key is stored (or the provider needs none).")
    paused = serializers.BooleanField()
    database = serializers.CharField()
    dialect = serializers.CharField()
    pgvector_available = serializers.BooleanField()
    pgvector_installed = serializers.BooleanField()
    pgvector_ready = serializers.BooleanField()
    pgvector_version = serializers.CharField(allow_null=True)
    reason = serializers.CharField(allow_null=True)
    setup_hint = serializers.CharField(allow_null=True)
    provider = serializers.CharField()
    model = serializers.CharField()
    dimensions = serializers.IntegerField()
    space_id = serializers.IntegerField(allow_null=True)
    chunks = ChunkCountsSerializer()
    queue_depth = serializers.IntegerField()
    last_indexed_at = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField(allow_null=True)
    unsynced_documents = serializers.IntegerField(
        help_text="Live documents whose current version has no chunks yet: a chunk sync is pending, "
        "failed (see `last_error`) or was lost; the poll's sweep chunks them again."
    )
    unavailable_reason = serializers.CharField(allow_null=True)


class ReindexSerializer(serializers.Serializer):
    queued = serializers.BooleanField()
    status = IndexingStatusSerializer()


def _require_admin(actor: Actor) -> None:
    if not actor.is_admin:
        raise PermissionDenied("Only workspace admins can see or change the embedding index.")


class IndexingStatusView(APIView):
    """The workspace's embedding index: readiness, provider, chunk counts, queue, last error."""

    @extend_schema(responses={200: IndexingStatusSerializer, 401: ERROR, 403: ERROR})
    def get(self, request: Request) -> Response:
        _require_admin(request.actor)
        return Response(pipeline.indexing_status(request.actor.workspace.pk))


class ReindexView(APIView):
    """Rebuild every chunk of the workspace and re-queue failed ones (vectors are reused by text)."""

    @extend_schema(request=None, responses={202: ReindexSerializer, 401: ERROR, 403: ERROR})
    def post(self, request: Request) -> Response:
        from knowledge.embeddings import store
        from knowledge.tasks import reindex_workspace_task

        _require_admin(request.actor)
        store.ensure()
        workspace_id = request.actor.workspace.pk
        reindex_workspace_task.delay(workspace_id)
        return Response({"queued": True, "status": pipeline.indexing_status(workspace_id)}, status=202)
