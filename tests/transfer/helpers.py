"""Drive `agor` as a user would: a subprocess, stdout and stderr apart, redirected or on a pty."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    raw: bytes = b""

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


def cli_env(
    url: str | None = None, token: str | None = None, config_dir: Path | None = None, **extra: str
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGOR_", "DJANGO_"))}
    if url:
        env["AGOR_URL"] = url
    if token:
        env["AGOR_TOKEN"] = token
    if config_dir is not None:
        env["AGOR_CONFIG_DIR"] = str(config_dir)
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def agor(
    *args: str, env: dict[str, str], input: str | None = None, timeout: float = 120, cwd: Path | None = None
) -> Run:
    """Run `python -m transfer.cli ARGS` without a controlling terminal, output redirected."""
    proc = subprocess.run(
        [sys.executable, "-m", "transfer.cli", *args],
        input=(input or "").encode(),
        capture_output=True,
        env=env,
        timeout=timeout,
        cwd=str(cwd or ROOT),
        start_new_session=True,
    )
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    return Run(proc.returncode, out, err, proc.stdout)


def agor_pty(*args: str, env: dict[str, str], timeout: float = 60) -> Run:
    """Run the CLI with stdout and stderr on a pseudo-terminal (what a person at a terminal sees)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "transfer.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env={**env, "TERM": "xterm", "COLUMNS": "200"},
        cwd=str(ROOT),
        start_new_session=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                data = b""
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            # Drain whatever is left.
            try:
                while data := os.read(master, 65536):
                    chunks.append(data)
            except OSError:
                pass
            break
        if time.monotonic() > deadline:
            proc.kill()
            break
    os.close(master)
    code = proc.wait(timeout=10)
    raw = b"".join(chunks)
    text = raw.decode("utf-8", "replace")
    return Run(code, text, "", raw)


def tree_bytes(root: Path, *, below: str = "") -> dict[str, bytes]:
    """Every regular file under root (except .git, .agor and the lock) with its bytes."""
    found: dict[str, bytes] = {}
    base = root / below if below else root
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] in (".git", ".agor", ".agor-lock"):
            continue
        if path.is_file():
            found[rel] = path.read_bytes()
    return found
