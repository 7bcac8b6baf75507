"""The CLI's one HTTP client: a thin synchronous wrapper over the Knowledge REST API.

It never imports Django, so `agor` runs on a laptop with only the client dependencies. Errors keep
only what is safe to print: the HTTP status, the server's machine `code`, the request's method and
route template, and the names (never the values) of invalid fields.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx2

from transfer.version import client_version

TIMEOUT_SECONDS = 120.0
_CODE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_FIELD = re.compile(r"^[A-Za-z0-9_]{1,40}$")
MAX_FIELDS = 8


class ApiError(Exception):
    """A failed request. `status` is 0 for transport failures (nothing was answered)."""

    def __init__(
        self,
        *,
        status: int,
        code: str,
        method: str,
        route: str,
        detail: str = "",
        fields: tuple[str, ...] = (),
        body: dict[str, Any] | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.method = method
        self.route = route
        self.detail = detail
        self.fields = fields
        self.body = body or {}
        super().__init__(f"HTTP {status} {code} ({method} {route})")

    @property
    def transport(self) -> bool:
        return self.status == 0


def _clean_code(value: Any) -> str:
    text = str(value or "")
    return text if _CODE.match(text) else "error"


def _field_names(errors: Any, prefix: str = "") -> list[str]:
    """Dotted names of invalid fields (`items.2.content`), never their values or messages."""
    names: list[str] = []
    if isinstance(errors, dict):
        for key, value in errors.items():
            part = str(key) if _FIELD.match(str(key)) else "?"
            path = f"{prefix}.{part}" if prefix else part
            nested = _field_names(value, path) if isinstance(value, (dict, list)) else []
            names.extend(nested or [path])
    elif isinstance(errors, list):
        for index, value in enumerate(errors):
            if isinstance(value, (dict, list)) and value:
                if isinstance(value, dict):
                    names.extend(_field_names(value, f"{prefix}.{index}" if prefix else str(index)))
                elif prefix:
                    names.append(prefix)
    return names


def encode_json(data: Any) -> bytes:
    """The exact bytes sent for a JSON body; import limits are measured on this encoding."""
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


class KnowledgeClient:
    """Bearer-token JSON requests against one deployment."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        transport: httpx2.BaseTransport | None = None,
        timeout: float = TIMEOUT_SECONDS,
        after_response: Callable[[], None] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._after_response = after_response
        self._client = httpx2.Client(
            base_url=self.url,
            headers={
                "Authorization": f"Bearer {token}",
                "User-Agent": f"agor-cli/{client_version()}",
                "Accept": "application/json",
            },
            timeout=timeout,
            transport=transport,
            follow_redirects=False,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> KnowledgeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        route: str | None = None,
    ) -> Any:
        """One request; `route` is the template named in errors (no ids, no query string)."""
        label = route or path
        clean = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        kwargs: dict[str, Any] = {"params": clean}
        if body is not None:
            kwargs["content"] = body if isinstance(body, bytes) else encode_json(body)
            kwargs["headers"] = {"Content-Type": "application/json"}
        try:
            response = self._client.request(method, path, **kwargs)
        except httpx2.HTTPError as exc:
            raise ApiError(status=0, code="transport", method=method, route=label, detail=type(exc).__name__) from None
        if self._after_response is not None:
            self._after_response()
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code >= 400:
            payload = data if isinstance(data, dict) else {}
            raise ApiError(
                status=response.status_code,
                code=_clean_code(payload.get("code")) if payload else "error",
                method=method,
                route=label,
                detail=str(payload.get("detail") or response.reason_phrase or ""),
                fields=tuple(dict.fromkeys(_field_names(payload.get("errors"))))[:MAX_FIELDS],
                body=payload,
            )
        if data is None:
            raise ApiError(status=response.status_code, code="bad_response", method=method, route=label)
        return data

    def get(self, url: str, /, *, route: str | None = None, **params: Any) -> Any:
        return self.request("GET", url, params=params, route=route)

    def post(self, url: str, body: Any, /, *, route: str | None = None) -> Any:
        return self.request("POST", url, body=body, route=route)


def _param(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value
