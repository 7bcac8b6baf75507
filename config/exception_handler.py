"""Renders every API error as {"detail", "code", ...extra} with a fitting status."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from config.exceptions import DomainError

DRF_CODES = {
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.ParseError: "parse_error",
    exceptions.Throttled: "throttled",
}


def domain_error_response(exc: DomainError) -> Response:
    return Response({"detail": exc.message, "code": exc.code, **exc.extra}, status=exc.http_status)


def _field_errors(detail: Any) -> Any:
    """Flatten DRF's ErrorDetail tree into plain strings."""
    if isinstance(detail, dict):
        return {key: _field_errors(value) for key, value in detail.items()}
    if isinstance(detail, list):
        return [_field_errors(value) for value in detail]
    return str(detail)


def domain_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DomainError):
        return domain_error_response(exc)
    if isinstance(exc, DjangoValidationError):
        errors = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        return Response(
            {"detail": "Invalid input.", "code": "invalid", "errors": errors},
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()

    if isinstance(exc, exceptions.ValidationError):
        return Response(
            {"detail": "Invalid input.", "code": "invalid", "errors": _field_errors(exc.detail)},
            status=status.HTTP_400_BAD_REQUEST,
        )
    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    code = next((c for cls, c in DRF_CODES.items() if isinstance(exc, cls)), exc.default_code)
    detail = exc.detail if isinstance(exc.detail, str) else _field_errors(exc.detail)
    if isinstance(exc, exceptions.NotFound):
        detail = "Not found."
    response.data = {"detail": str(detail), "code": code}
    return response
