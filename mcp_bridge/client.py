"""The one HTTP client the bridge uses: a thin async wrapper over the Knowledge REST API."""

from __future__ import annotations

from typing import Any

import httpx2

from mcp_bridge.config import AgorConfig

TIMEOUT_SECONDS = 60.0


class ApiError(Exception):
    """A non-2xx answer from the API, with its stable `code` and `detail`."""

    def __init__(self, status: int, code: str, detail: str, body: dict[str, Any] | None = None) -> None:
        self.status, self.code, self.detail, self.body = status, code, detail, body or {}
        super().__init__(f"{status} {code}: {detail}")


class KnowledgeApi:
    def __init__(self, config: AgorConfig, *, transport: Any = None) -> None:
        self.config = config
        self._client = httpx2.AsyncClient(
            base_url=config.url or "http://127.0.0.1:8000",
            headers={"Authorization": f"Bearer {config.token}", "User-Agent": "agor-mcp"},
            timeout=TIMEOUT_SECONDS,
            transport=transport,
        )

    async def request(
        self, method: str, path: str, *, params: dict[str, Any] | None = None, json: Any = None
    ) -> dict[str, Any]:
        clean = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        try:
            response = await self._client.request(method, path, params=clean, json=json)
        except httpx2.HTTPError as exc:
            raise ApiError(0, "unreachable", f"Cannot reach {self.config.url}: {exc.__class__.__name__}") from exc
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code >= 400:
            if not isinstance(body, dict):
                body = {}
            detail = body.get("detail") or response.reason_phrase or "error"
            raise ApiError(response.status_code, str(body.get("code") or "error"), str(detail), body)
        return body if isinstance(body, dict) else {"data": body}

    async def get(self, url: str, /, **params: Any) -> dict[str, Any]:
        return await self.request("GET", url, params=params)

    async def aclose(self) -> None:
        await self._client.aclose()


def _param(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return value
