"""Teammate memory endpoints: context, memory append, and the teammate's own config."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.exceptions import NotFound, PermissionDenied
from knowledge import teammate
from knowledge.api import serializers as s
from knowledge.api.views import parse, responses
from knowledge.models import EditPolicy
from workspaces.access import Actor, actor_for
from workspaces.models import Membership, Visibility

MEMORY_PREVIEW_CHARS = 8000


class TeammateConfigSerializer(serializers.Serializer):
    user = serializers.CharField(read_only=True)
    home_namespace = serializers.CharField(read_only=True, allow_null=True)
    memory_path_template = s.TextField(max_length=200, required=False)
    memory_visibility = serializers.ChoiceField(choices=Visibility.values, required=False)
    memory_edit_policy = serializers.ChoiceField(choices=EditPolicy.values, required=False)
    grants = serializers.ListField(child=serializers.DictField(), required=False, max_length=100)


class TeammateQuerySerializer(serializers.Serializer):
    user = s.TextField(max_length=150, required=False, help_text="Workspace admins: another member's config.")


class ContextQuerySerializer(serializers.Serializer):
    include_memory = serializers.BooleanField(default=True)
    limit = serializers.IntegerField(min_value=1, max_value=50, default=10)


class MemoryDocumentSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    reference_uri = serializers.CharField()
    path = serializers.CharField()
    title = serializers.CharField()
    updated_at = serializers.DateTimeField()
    version = serializers.IntegerField()
    content = serializers.CharField()
    truncated = serializers.BooleanField()


class ContextSerializer(serializers.Serializer):
    user = serializers.CharField()
    workspace = serializers.CharField()
    config = TeammateConfigSerializer()
    namespace = serializers.CharField()
    memory = MemoryDocumentSerializer(many=True)


class MemoryAppendSerializer(serializers.Serializer):
    bullets = serializers.JSONField(help_text="A string (one bullet per line) or a list of strings.")
    date = serializers.DateField(required=False)
    category = serializers.ChoiceField(choices=teammate.CATEGORIES, default="note")
    tags = serializers.ListField(child=s.TextField(max_length=64), required=False, max_length=20, default=list)
    importance = serializers.ChoiceField(choices=teammate.IMPORTANCE, required=False)
    idempotency_key = s.TextField(max_length=200, required=False)

    def validate_bullets(self, value: Any) -> str | list[str]:
        if isinstance(value, str):
            items: Any = value
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            items = value
        else:
            raise serializers.ValidationError("bullets must be a string or a list of strings.")
        text = items if isinstance(items, str) else "\n".join(items)
        if len(text) > 64 * 1024:
            raise serializers.ValidationError("bullets are limited to 64 KiB per call.")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise serializers.ValidationError("bullets must be valid Unicode text.") from exc
        return items


class AppendedSerializer(serializers.Serializer):
    text = serializers.CharField()
    hash = serializers.CharField()
    deduped = serializers.BooleanField()


class MemoryAppendResultSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    path = serializers.CharField()
    appended = AppendedSerializer(many=True)
    document_id = serializers.CharField(allow_null=True)


def _config_data(config: Any) -> dict[str, Any]:
    return {
        "user": config.user.username,
        "home_namespace": config.home_namespace.slug if config.home_namespace else None,
        "memory_path_template": config.memory_path_template,
        "memory_visibility": config.memory_visibility,
        "memory_edit_policy": config.memory_edit_policy,
        "grants": config.grants,
    }


def _target_actor(request: Request, username: str | None) -> Actor:
    """The caller, or (for workspace admins) another member of the workspace."""
    actor: Actor = request.actor
    if not username or username == actor.user.username:
        return actor
    if not actor.is_admin:
        raise PermissionDenied("Only workspace admins can manage another member's teammate config.")
    user = get_user_model().objects.filter(username=username).first()
    if user is None or not Membership.objects.filter(user=user, workspace=actor.workspace).exists():
        raise NotFound("Member not found.")
    return actor_for(user, actor.workspace)


class TeammateContextView(APIView):
    """The teammate's config, home namespace and recent memory (created on first use)."""

    @extend_schema(parameters=[ContextQuerySerializer], responses=responses(ContextSerializer))
    def get(self, request: Request) -> Response:
        query = parse(ContextQuerySerializer, request.query_params)
        actor = request.actor
        home = teammate.teammate_home(actor)
        actor.forget_permissions()
        memory = []
        if query["include_memory"]:
            for doc in teammate.memory_recent(actor=actor, home=home, limit=query["limit"]):
                content = doc.current_version.content
                memory.append(
                    {
                        "id": str(doc.pk),
                        "reference_uri": doc.reference_uri,
                        "path": doc.path,
                        "title": doc.title,
                        "updated_at": doc.updated_at,
                        "version": doc.current_version.number,
                        "content": content[:MEMORY_PREVIEW_CHARS],
                        "truncated": len(content) > MEMORY_PREVIEW_CHARS,
                    }
                )
        body = {
            "user": actor.user.username,
            "workspace": actor.workspace.slug,
            "config": _config_data(teammate.teammate_config(actor)),
            "namespace": home.slug,
            "memory": memory,
        }
        return Response(ContextSerializer(body).data)


class TeammateMemoryView(APIView):
    """Append memory bullets to the teammate's daily memory document."""

    @extend_schema(request=MemoryAppendSerializer, responses=responses(MemoryAppendResultSerializer, 200, 403, 409))
    def post(self, request: Request) -> Response:
        data = parse(MemoryAppendSerializer, request.data)
        result = teammate.memory_append(
            actor=request.actor,
            bullets=data["bullets"],
            day=data.get("date"),
            category=data["category"],
            tags=data["tags"],
            importance=data.get("importance"),
            idempotency_key=data.get("idempotency_key"),
        )
        return Response(result)


class TeammateConfigView(APIView):
    """Read or change a teammate config (your own; workspace admins: anyone's via ?user=)."""

    @extend_schema(
        parameters=[OpenApiParameter("user", str, required=False)],
        responses=responses(TeammateConfigSerializer, 200, 403),
    )
    def get(self, request: Request) -> Response:
        query = parse(TeammateQuerySerializer, request.query_params)
        actor = _target_actor(request, query.get("user"))
        return Response(_config_data(teammate.teammate_config(actor)))

    @extend_schema(
        parameters=[OpenApiParameter("user", str, required=False)],
        request=TeammateConfigSerializer,
        responses=responses(TeammateConfigSerializer, 200, 403),
    )
    def patch(self, request: Request) -> Response:
        query = parse(TeammateQuerySerializer, request.query_params)
        data = parse(TeammateConfigSerializer, request.data)
        actor = _target_actor(request, query.get("user"))
        config = teammate.teammate_config_update(config=teammate.teammate_config(actor), changes=data)
        return Response(_config_data(config))
