"""config.db_workers: reads beside the request's own, on a second connection only where that is safe."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction

from config.db_workers import ConnectionWorkers
from workspaces.models import Workspace
from workspaces.services import workspace_ensure


def backend() -> tuple[int | str, str]:
    """(database session id, thread name) of whoever runs this."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_backend_pid()")
            session = cursor.fetchone()[0]
        else:
            session = id(connection.connection)
    return session, threading.current_thread().name


@pytest.fixture
def workers() -> Iterator[ConnectionWorkers]:
    pool = ConnectionWorkers(size=2)
    yield pool
    pool.shutdown()


def test_outside_a_transaction_work_runs_on_another_connection_and_sees_committed_rows(transactional_db, workers):
    workspace_ensure(slug="committed", name="Committed")
    session, thread = workers.submit(backend).result()
    seen = workers.submit(lambda: Workspace.objects.filter(slug="committed").exists()).result()
    assert seen
    if connection.vendor == "postgresql":
        assert thread.startswith("db-worker-") and session != backend()[0]
    else:  # SQLite: one writer's file, and test databases that threads may not share
        assert (session, thread) == backend()


def test_inside_a_transaction_work_runs_inline_and_sees_uncommitted_rows(transactional_db, workers):
    with transaction.atomic():
        workspace_ensure(slug="uncommitted", name="Uncommitted")
        assert workers.submit(backend).result() == backend()
        assert workers.submit(lambda: Workspace.objects.filter(slug="uncommitted").exists()).result()


def test_independent_work_runs_beside_a_transaction(transactional_db, workers):
    """Work that reads no table (computing tsvectors, say) needs no view of the caller's writes."""
    with transaction.atomic():
        session, thread = workers.submit(backend, independent=True).result()
        vector = workers.submit(lambda: _tsvector("Running shards"), independent=True).result()
        if connection.vendor == "postgresql":
            assert thread.startswith("db-worker-") and session != backend()[0]
            assert vector == "'run':1 'shard':2"
        else:
            assert (session, thread) == backend()


def _tsvector(text: str) -> str | None:
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_tsvector('english', %s)", [text])
        return cursor.fetchone()[0]


def test_errors_reach_the_caller(transactional_db, workers):
    def fail() -> Any:
        raise ValueError("bad leg")

    with pytest.raises(ValueError, match="bad leg"):
        workers.submit(fail).result()
    assert workers.submit(lambda: 42).result() == 42  # the worker survives the error


@pytest.mark.skipif(connection.vendor != "postgresql", reason="second connections are a PostgreSQL feature")
def test_two_calls_run_at_once_and_shutdown_closes_their_connections(transactional_db, workers):
    both_running = threading.Barrier(3, timeout=10)

    def meet() -> int:
        both_running.wait()  # only passes when both workers are inside a call at the same time
        return backend()[0]

    first, second = workers.submit(meet), workers.submit(meet)
    both_running.wait()
    sessions = {first.result(), second.result()}
    assert len(sessions) == 2 and backend()[0] not in sessions

    workers.shutdown()
    deadline = time.monotonic() + 5
    with connection.cursor() as cursor:
        while True:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [list(sessions)])
            if cursor.fetchone()[0] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [list(sessions)])
        assert cursor.fetchone()[0] == 0
