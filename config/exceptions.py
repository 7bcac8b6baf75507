"""Coded domain errors. Services raise these; one handler renders them for every surface."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """An expected failure with a stable machine-readable `code` and an HTTP status."""

    http_status = 400
    code = "invalid"
    default_message = "Invalid request."

    def __init__(self, message: str | None = None, *, code: str | None = None, **extra: Any) -> None:
        self.message = message or self.default_message
        if code:
            self.code = code
        self.extra = extra
        super().__init__(self.message)


class Invalid(DomainError):
    http_status = 400
    code = "invalid"


class NotFound(DomainError):
    """Missing or invisible: both answer exactly the same, so existence never leaks."""

    http_status = 404
    code = "not_found"
    default_message = "Not found."


class PermissionDenied(DomainError):
    http_status = 403
    code = "permission_denied"
    default_message = "You do not have permission to perform this action."


class Conflict(DomainError):
    """The state is not what the caller assumed (stale version, taken path, archive guard)."""

    http_status = 409
    code = "conflict"
    default_message = "The object changed; reload it and retry."


class TooLarge(DomainError):
    http_status = 413
    code = "too_large"
    default_message = "The request is too large."
