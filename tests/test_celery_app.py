"""A real Celery worker keeps its PostgreSQL session from one task to the next, as a request thread
does, and replaces a session the server dropped instead of failing the next task on it."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from knowledge.models import Document, DocumentOutline
from tests.conftest import create_document, create_namespace, wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="workers run on the PostgreSQL test database"),
]
APPLICATION = "kb-test-worker"  # libpq reads PGAPPNAME: the worker's sessions carry this name


@pytest.fixture
def worker_env() -> dict[str, str]:
    return {"PGAPPNAME": APPLICATION}


def worker_sessions() -> list[tuple[int, Any]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid, backend_start FROM pg_stat_activity WHERE application_name = %s", [APPLICATION])
        return cursor.fetchall()


def test_a_worker_keeps_its_session_between_tasks_and_replaces_a_dropped_one(workers, queue, http, owner):
    create_namespace(http, owner, "notes")
    versions = []
    for n in range(3):
        document = create_document(http, owner, "notes", f"n{n}.md", f"# Note {n}\n\n## Part\n\nText {n}.\n")
        versions.append(str(Document.objects.get(pk=document["id"]).current_version_id))
    DocumentOutline.objects.all().delete()  # stored eagerly by the saves above; the worker stores them again

    def stored(version_id: str) -> bool:
        return DocumentOutline.objects.filter(version_id=version_id).exists()

    workers()
    queue("store_outline_task", versions[0])
    wait_for(lambda: stored(versions[0]), "the first outline")
    first = wait_for(worker_sessions, "the worker's session")
    assert len(first) == 1  # still open after the task

    queue("store_outline_task", versions[1])
    wait_for(lambda: stored(versions[1]), "the second outline")
    assert worker_sessions() == first  # the same backend, not a reconnection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [first[0][0]])
    wait_for(lambda: not worker_sessions(), "the session to end")
    queue("store_outline_task", versions[2])
    wait_for(lambda: stored(versions[2]), "the outline after the session was dropped")
    [(pid, _)] = worker_sessions()
    assert pid != first[0][0]
    assert DocumentOutline.objects.get(version_id=versions[2]).line_count == 5
