"""Request-level guards that must run before any view reads the body, and response headers."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


class RequestSizeLimitMiddleware:
    """Answer 413 for bodies over the limit before anything buffers them.

    DRF's JSON parser reads the raw stream, so Django's DATA_UPLOAD_MAX_MEMORY_SIZE
    alone does not protect API endpoints.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.KNOWLEDGE_MAX_REQUEST_BYTES
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return JsonResponse({"detail": "Invalid Content-Length header.", "code": "invalid"}, status=400)
        if length > limit:
            return JsonResponse(
                {
                    "detail": f"Request body is {length} bytes; the limit is {limit} bytes.",
                    "code": "request_too_large",
                    "limit_bytes": limit,
                },
                status=413,
            )
        return self.get_response(request)


class ReaderContentSecurityPolicyMiddleware:
    """Send the reader pages' Content-Security-Policy (no inline or remote scripts).

    Applies to paths under `KNOWLEDGE_READER_CSP_PATHS`; a view that sets its own header keeps it.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path.startswith(settings.KNOWLEDGE_READER_CSP_PATHS) and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = settings.KNOWLEDGE_READER_CSP
        return response
