"""Tests of the MCP bridge process."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def run_async(main: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """`asyncio.run` on a fresh thread: Playwright's sync API keeps a loop running on the main one."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(main())).result()
