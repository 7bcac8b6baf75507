"""Cross-cutting endpoints: public health, the caller's identity, JSON error pages."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from knowledge.api.serializers import ErrorSerializer, HealthSerializer, MeSerializer


@extend_schema(responses={200: HealthSerializer}, auth=[])
@api_view(["GET"])
@authentication_classes([])
@permission_classes([AllowAny])
def health(request: Request) -> Response:
    """Public liveness and database probe; always 200, `status` says whether all is well."""
    started = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        database: dict[str, Any] = {"ok": True}
    except Exception as exc:
        database = {"ok": False, "error": exc.__class__.__name__}
    database["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
    database["vendor"] = connection.vendor
    return Response(
        {
            "status": "ok" if database["ok"] else "degraded",
            "version": settings.KNOWLEDGE_VERSION,
            "database": database,
            "timestamp": timezone.now(),
        }
    )


@extend_schema(responses={200: MeSerializer, 401: ErrorSerializer})
@api_view(["GET"])
def me(request: Request) -> Response:
    """Who the token acts as, and in which workspace."""
    actor = request.actor
    return Response(
        {
            "user": actor.user.username,
            "workspace": actor.workspace.slug,
            "role": actor.role,
            "version": settings.KNOWLEDGE_VERSION,
        }
    )


def json_not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)


def json_server_error(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"detail": "Internal server error.", "code": "server_error"}, status=500)
