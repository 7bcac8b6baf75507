"""Fixtures for semantic search tests: a loopback provider and a workspace with semantic search on."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from tests.embedding_server import EmbeddingServer
from tests.knowledge.semantic_helpers import DIMENSIONS, KEY, enable


@pytest.fixture
def embedder():
    server = EmbeddingServer(dimensions=DIMENSIONS, api_key=KEY).start()
    yield server
    server.stop()


@pytest.fixture
def clean_vectors(transactional_db: Any) -> None:
    """The vector table is outside Django's models, so test flushes do not empty it."""
    from knowledge.embeddings import store

    if connection.vendor != "postgresql":
        return
    store.ensure()
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {store.TABLE}")


@pytest.fixture
def semantic_admin(http, make_member, embedder, clean_vectors):
    """A workspace admin whose workspace embeds through the loopback provider."""
    admin = make_member("admin", username="ada")
    enable(http, admin, embedder)
    return admin
