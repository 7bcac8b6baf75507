"""Reads that run beside the request's own, on a second database connection.

Hybrid search asks PostgreSQL two independent questions (text ranking and nearest vectors);
on two connections they run side by side instead of one after the other. Each worker thread
keeps its connection between calls the way request threads do: a connection past CONN_MAX_AGE
or broken is dropped before and after each call.

A second connection sees only committed rows, so inside a transaction (or on SQLite, whose
test databases live in one connection's file lock) the work runs inline on the caller's own
connection instead, unless it reads no table at all (`independent`: computing tsvectors for a
large write, say), which may run beside the caller's transaction.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from django.db import close_old_connections, connection, connections

T = TypeVar("T")


class ConnectionWorkers:
    """A few threads, each with its own database connection, started on first use."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._tasks: queue.SimpleQueue[tuple[Future, Callable[[], object]] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, work: Callable[[], T], *, independent: bool = False) -> Future[T]:
        """Start `work` on a worker's connection (or run it now, inline, where a second
        connection would not see what the caller sees); `.result()` gives its value or raises."""
        future: Future[T] = Future()
        if connection.vendor != "postgresql" or (connection.in_atomic_block and not independent):
            _run(future, work)
            return future
        with self._lock:
            if self._idle == 0 and len(self._threads) < self.size:
                thread = threading.Thread(target=self._work, name=f"db-worker-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
            else:
                self._idle = max(0, self._idle - 1)
        self._tasks.put((future, work))
        return future

    def _work(self) -> None:
        while (task := self._tasks.get()) is not None:
            future, work = task
            close_old_connections()
            _run(future, work)
            close_old_connections()
            with self._lock:
                self._idle += 1
        connections.close_all()

    def shutdown(self) -> None:
        """Stop the threads and close their connections (before a test database is dropped)."""
        with self._lock:
            threads, self._threads, self._idle = self._threads, [], 0
        for _ in threads:
            self._tasks.put(None)
        for thread in threads:
            thread.join()


def _run(future: Future[T], work: Callable[[], T]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(work())
    except BaseException as exc:  # handed to the caller's .result()
        future.set_exception(exc)


# Gunicorn's threads per process are few; a hybrid search holds one worker for its text leg.
side_queries = ConnectionWorkers(size=4)
