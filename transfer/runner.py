"""Runs export, import and validate for both front ends: the `agor` CLI and the manage.py commands.

stdout receives exactly one JSON document (the summary, also after a failure); progress, the
plan line, reminders and sanitized errors go to stderr. Ctrl-C / SIGTERM stop scheduling new
work, keep what is done and say how to resume.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from transfer import format as fmt
from transfer.client import KnowledgeClient
from transfer.errors import TransferError
from transfer.localfs import Repo
from transfer.progress import Progress
from transfer.repository import build_plan, read_repository, validate_summary
from transfer.terminal import escape_text, safe_json
from transfer.version import client_version

Engine = Callable[[KnowledgeClient, Any, Progress, threading.Event, dict[str, Any]], int]


@contextmanager
def cancellation() -> Iterator[threading.Event]:
    """SIGINT/SIGTERM set an event the engines check between units of work (main thread only)."""
    event = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield event
        return

    def handler(signum: int, frame: Any) -> None:
        if event.is_set():
            raise KeyboardInterrupt
        event.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield event
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _error_text(exc: Exception) -> tuple[str, str]:
    if isinstance(exc, fmt.FormatError):
        where = f"{exc.file}: " if exc.file else ""
        return exc.code, f"{where}{exc.message}"
    if isinstance(exc, TransferError):
        return "cancelled" if exc.exit_code == 130 else "transfer_failed", exc.message
    return "error", str(exc)


def run_engine(
    engine: Engine, client: KnowledgeClient, options: Any, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    progress = Progress(err)
    summary: dict[str, Any] = {}
    with cancellation() as cancel:
        try:
            code = engine(client, options, progress, cancel, summary)
        except (TransferError, fmt.FormatError) as exc:
            progress.finish()
            progress.stopped()
            kind, message = _error_text(exc)
            err.write(f"agor: error: {escape_text(message)}\n")
            summary.update(ok=False, error={"code": kind, "message": message}, client_version=client_version())
            code = exc.exit_code if isinstance(exc, TransferError) else 1
        else:
            summary.setdefault("ok", code == 0)
        finally:
            progress.close()
    out.write(safe_json(summary) + "\n")
    out.flush()
    return code


def run_validate(directory: Path, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Offline: no login, no network, no writes."""
    out = out or sys.stdout
    err = err or sys.stderr
    progress = Progress(err)
    try:
        with Repo(directory) as repo:
            snapshot = read_repository(repo, progress)
            plan = build_plan(repo, snapshot, snapshot.manifest.namespace.slug, progress)
        result = validate_summary(snapshot, plan)
        code = 0
    except fmt.FormatError as exc:
        progress.finish()
        kind, message = _error_text(exc)
        err.write(f"agor: error: {escape_text(message)}\n")
        result = {"valid": False, "error": {"code": kind, "message": message}}
        code = 1
    finally:
        progress.close()
    out.write(safe_json(result) + "\n")
    out.flush()
    return code
