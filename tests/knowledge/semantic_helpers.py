"""Helpers for semantic search tests (their fixtures live in this folder's conftest)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

KEY = "sk-test-loopback-" + "k" * 24
DIMENSIONS = 32

postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="vectors live in pgvector; SQLite deployments search text only"
)


def enable(http, admin, embedder, **fields: Any) -> dict[str, Any]:
    body = {
        "enabled": True,
        "provider": "openai-compatible",
        "model": "test-embed",
        "dimensions": DIMENSIONS,
        "base_url": embedder.url,
        "api_key": KEY,
        **fields,
    }
    response = http.as_(admin).patch("/kb/settings/semantic", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def status(http, admin) -> dict[str, Any]:
    response = http.as_(admin).get("/kb/settings/semantic/status")
    assert response.status_code == 200, response.text
    return response.json()
