"""The HTTP client that load phases time requests with: the standard library's `http.client`.

The clients run on the same two cores as the server, so what they spend is taken from it. httpx
costs about 0.95 ms of CPU per request on this machine shape, `http.client` about 0.3 ms; with
four client threads sharing one GIL, httpx's share also delays the next thread's clock. The
reference figures were measured with `wrk`, which costs next to nothing; this keeps us close to
that without a second tool to install.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Response:
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class LoadClient:
    """One connection to the server, reopened whenever the server closes it (gunicorn's sync
    workers close after every response)."""

    def __init__(self, base_url: str, timeout: float = 300) -> None:
        parts = urlsplit(base_url)
        self._connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)

    def request(
        self, method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> Response:
        """Send one request and read the whole response. Never retried: a save may have landed."""
        self._connection.request(method, url, body=body, headers=headers or {})
        response = self._connection.getresponse()
        content = response.read()
        if response.will_close:
            self._connection.close()
        return Response(response.status, content)

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> LoadClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
