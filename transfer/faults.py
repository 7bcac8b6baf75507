"""Test-only fault injection: SIGKILL this process at a named point or after N HTTP answers.

`AGOR_TRANSFER_FAULT=export:journal` (or `import:batch:3` for the third time that point is
reached) and `AGOR_TRANSFER_KILL_AFTER=N` (responses). Unset in normal use, where these are no-ops.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

_hits: Counter[str] = Counter()
_responses = 0


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def point(name: str) -> None:
    spec = os.environ.get("AGOR_TRANSFER_FAULT")
    if not spec:
        return
    target, _, count = spec.rpartition(":") if spec.rsplit(":", 1)[-1].isdigit() else (spec, "", "1")
    if target != name:
        return
    _hits[name] += 1
    if _hits[name] == int(count or 1):
        _die()


def after_response() -> None:
    global _responses
    limit = os.environ.get("AGOR_TRANSFER_KILL_AFTER")
    if not limit:
        return
    _responses += 1
    if _responses >= int(limit):
        _die()
