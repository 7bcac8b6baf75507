"""Punctuated tokens in questions (read-only, subprocess.run, What's) still find documents."""

from __future__ import annotations

import pytest

from knowledge.services import document_create
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def docs(alice):
    ns = namespace_create(actor=alice.actor, slug="docs", others_can="read")
    document_create(
        actor=alice.actor,
        namespace=ns,
        path="python/subprocess.md",
        content="# subprocess\n\nUse subprocess.run with timeout= to stop slow children.\n",
    )
    document_create(
        actor=alice.actor,
        namespace=ns,
        path="mount.md",
        content="# Mounting\n\nPass -o ro for a read-only mount of the volume.\n",
    )
    document_create(
        actor=alice.actor,
        namespace=ns,
        path="django.md",
        content="# Django cache\n\nDjango's cache framework stores rendered pages.\n",
    )
    document_create(
        actor=alice.actor,
        namespace=ns,
        path="http.md",
        content="# Protocols\n\nHTTP/2 multiplexes streams over one connection.\n",
    )


@pytest.mark.parametrize(
    "q, expected",
    [
        ("subprocess.run timeout", "python/subprocess.md"),
        ("How do I make a read-only mount?", "mount.md"),
        ("What's Django's cache for?", "django.md"),
        ("does HTTP/2 multiplex streams", "http.md"),
        ("subprocess.run", "python/subprocess.md"),
    ],
)
def test_punctuated_words_match(http, bob, docs, q, expected):
    body = http.as_(bob).get("/kb/search", params={"q": q}).json()
    assert body["data"] and body["data"][0]["document"]["path"] == expected, body
