"""Retrieval quality with the offline local model: questions that share no words with their answers."""

from __future__ import annotations

import pytest

from tests.conftest import create_document, create_namespace
from tests.knowledge.quality_corpus import TARGETS, fillers
from tests.knowledge.semantic_helpers import postgres_only

pytestmark = [pytest.mark.django_db(transaction=True), postgres_only]


def recall_at_10(http, member, mode: str) -> tuple[float, set[str]]:
    found = set()
    for path, _, question in TARGETS:
        response = http.as_(member).get("/kb/search", params={"q": question, "mode": mode, "limit": 10})
        assert response.status_code == 200, response.text
        assert response.json()["effective_mode"] == mode
        if path in [hit["document"]["path"] for hit in response.json()["data"]]:
            found.add(path)
    return len(found) / len(TARGETS), found


def test_meaning_finds_what_words_miss(http, make_member, clean_vectors):
    admin = make_member("admin", username="ada")
    policy = {"enabled": True, "provider": "local", "model": "all-MiniLM-L6-v2", "dimensions": 384}
    assert http.as_(admin).patch("/kb/settings/semantic", json=policy).status_code == 200
    create_namespace(http, admin, "handbook")
    for path, body in [(path, body) for path, body, _ in TARGETS] + fillers():
        create_document(http, admin, "handbook", path, body)
    assert http.as_(admin).get("/kb/settings/semantic/status").json()["chunks"]["embedded"] == len(TARGETS) + 40

    text, text_found = recall_at_10(http, admin, "text")
    semantic, semantic_found = recall_at_10(http, admin, "semantic")
    hybrid, hybrid_found = recall_at_10(http, admin, "hybrid")
    print(f"\nrecall@10 over {len(TARGETS)} questions: text {text:.2f}, semantic {semantic:.2f}, hybrid {hybrid:.2f}")
    assert semantic >= 0.8 and hybrid >= 0.8
    assert text <= 0.4
    assert len(semantic_found - text_found) >= len(TARGETS) // 2
    assert len(hybrid_found - text_found) >= len(TARGETS) // 2
