"""Benchmark of the MCP bridge: start-up time and tool-call latency against a live server.

`python -m bench.mcp_bench [--backend sqlite|postgres] [--calls N] [--out FILE]` runs everything
itself: a fresh database, `manage.py migrate`, a small corpus loaded through the services,
gunicorn on a free loopback port, then `python -m mcp_bridge` spawned over stdio by the MCP SDK's
own client, exactly as an agent's MCP client starts it. It reports

- start-up: from spawning the process to a finished `initialize` (the bridge checks the token
  against the server on the way), over several fresh processes;
- median and p95 latency of `agor_kb_get`, `agor_kb_search` and `agor_kb_put` through the bridge,
  next to the same REST calls made directly, so the table shows what the bridge adds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.transfer_bench import BIN, PYTHON, ROOT, _django, free_port, wait_healthy

SEED = 20261204
NAMESPACE = "bench-mcp"
DOCUMENTS = 500
WORDS = (  # noqa: SIM905 - one line of prose reads better than 26 list items
    "deploy rollback cache queue worker index schema token session backup restore migrate replica "
    "latency quota tenant webhook retry timeout cursor shard vacuum embed search outline archive"
).split()
STARTS = 5


def build(state: Path) -> None:
    """500 documents of about 3 KB in one namespace, and an admin token, written to `state`."""
    _django()
    from django.db import transaction

    from knowledge.services import document_create
    from workspaces.access import actor_for
    from workspaces.services import membership_set, namespace_create, token_issue, user_ensure, workspace_ensure

    workspace = workspace_ensure(slug="bench", name="Bench")
    admin = user_ensure(username="bench-admin")
    membership_set(workspace=workspace, user=admin, role="admin")
    actor = actor_for(admin, workspace)
    namespace = namespace_create(actor=actor, slug=NAMESPACE, display_name="MCP bench")
    rng = random.Random(SEED)
    ids = []
    with transaction.atomic():
        for index in range(DOCUMENTS):
            paragraphs = [" ".join(rng.choice(WORDS) for _ in range(60)) for _ in range(8)]
            body = f"# Topic {index}\n\n" + "\n\n## Part\n\n".join(paragraphs) + "\n"
            doc = document_create(
                actor=actor, namespace=namespace, path=f"area-{index % 10}/t{index:04d}.md", content=body
            )
            ids.append(str(doc.pk))
    _, token = token_issue(user=admin, workspace=workspace, name="bench-mcp")
    state.write_text(json.dumps({"token": token, "ids": ids}))


def _quantiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"n": len(samples), "p50_ms": round(statistics.median(ordered) * 1000, 2), "p95_ms": round(p95 * 1000, 2)}


async def _bridge(base: str, token: str, ids: list[str], calls: int, work: Path) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {**os.environ, "AGOR_URL": base, "AGOR_TOKEN": token, "AGOR_WORKTREE": str(work)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("DATABASE_URL", None)
    params = StdioServerParameters(command=PYTHON, args=["-m", "mcp_bridge"], env=env, cwd=str(ROOT))
    starts: list[float] = []
    timings: dict[str, list[float]] = {"get": [], "search": [], "put": []}
    rng = random.Random(SEED + 1)
    for attempt in range(STARTS):
        started = time.perf_counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            starts.append(time.perf_counter() - started)
            if attempt:
                continue
            for i in range(calls):
                for name, args in (
                    ("get", ("agor_kb_get", {"documentId": rng.choice(ids)})),
                    ("search", ("agor_kb_search", {"query": " ".join(rng.sample(WORDS, 2)), "limit": 10})),
                    (
                        "put",
                        ("agor_kb_put", {"namespace": NAMESPACE, "path": "writes/mcp.md", "content": f"# W\n\n{i}\n"}),
                    ),
                ):
                    t0 = time.perf_counter()
                    result = await session.call_tool(*args)
                    timings[name].append(time.perf_counter() - t0)
                    if result.is_error:
                        raise SystemExit(f"{args[0]} failed: {result.content[0].text}")
    return {"startup": _quantiles(starts), **{k: _quantiles(v) for k, v in timings.items()}}


def _direct(base: str, token: str, ids: list[str], calls: int) -> dict[str, Any]:
    import httpx2

    timings: dict[str, list[float]] = {"get": [], "search": [], "put": []}
    rng = random.Random(SEED + 1)
    with httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        for i in range(calls):
            for name, (method, url, kwargs) in (
                ("get", ("GET", f"/kb/documents/{rng.choice(ids)}", {})),
                (
                    "search",
                    ("GET", "/kb/search", {"params": {"q": " ".join(rng.sample(WORDS, 2)), "limit": 10}}),
                ),
                (
                    "put",
                    (
                        "PUT",
                        f"/kb/namespaces/{NAMESPACE}/documents/writes/direct.md",
                        {"json": {"content": f"# D\n{i}\n"}},
                    ),
                ),
            ):
                t0 = time.perf_counter()
                response = client.request(method, url, **kwargs)
                timings[name].append(time.perf_counter() - t0)
                response.raise_for_status()
    return {k: _quantiles(v) for k, v in timings.items()}


def measure(backend: str, calls: int, out: Path | None) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="kb-mcpbench."))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CELERY_TASK_ALWAYS_EAGER": "true",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("KNOWLEDGE_PUBLIC_URL", None)
    pg_dir = None
    gunicorn = None
    try:
        if backend == "sqlite":
            env["DATABASE_URL"] = f"sqlite:///{work / 'bench.sqlite3'}"
        else:
            pg_dir = work / "pg"
            started = subprocess.run(
                [PYTHON, "tests/embedded_pg.py", "start", str(pg_dir)], cwd=ROOT, check=True, capture_output=True
            )
            env["DATABASE_URL"] = started.stdout.decode().strip()
        subprocess.run(
            [PYTHON, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True
        )
        state = work / "state.json"
        subprocess.run([PYTHON, "-m", "bench.mcp_bench", "build", "--state", str(state)], cwd=ROOT, env=env, check=True)
        facts = json.loads(state.read_text())
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        gunicorn = subprocess.Popen(
            [str(BIN / "gunicorn"), "config.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "4"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_healthy(base)
        direct = _direct(base, facts["token"], facts["ids"], calls)
        bridge = asyncio.run(_bridge(base, facts["token"], facts["ids"], calls, work))
        result = {"backend": backend, "documents": DOCUMENTS, "calls": calls, "bridge": bridge, "direct": direct}
        if out:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(result, indent=1))
        return result
    finally:
        if gunicorn is not None:
            gunicorn.send_signal(signal.SIGTERM)
            gunicorn.wait(timeout=30)
        if pg_dir is not None:
            subprocess.run([PYTHON, "tests/embedded_pg.py", "stop", str(pg_dir)], cwd=ROOT, check=False)
        shutil.rmtree(work, ignore_errors=True)


def report(result: dict[str, Any]) -> str:
    bridge, direct = result["bridge"], result["direct"]
    start = bridge["startup"]
    lines = [
        f"### MCP bridge ({result['backend']}, {result['documents']} documents, gunicorn 2x4, SDK stdio client)",
        "",
        f"Start-up to a finished `initialize`: p50 {start['p50_ms']:.0f} ms, slowest {start['p95_ms']:.0f} ms "
        f"over {start['n']} fresh processes.",
        "",
        "| tool | calls | bridge p50 ms | bridge p95 ms | REST p50 ms | REST p95 ms | bridge adds (p50) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, tool in (("get", "agor_kb_get"), ("search", "agor_kb_search"), ("put", "agor_kb_put")):
        b, d = bridge[name], direct[name]
        lines.append(
            f"| {tool} | {b['n']} | {b['p50_ms']} | {b['p95_ms']} | {d['p50_ms']} | {d['p95_ms']} | "
            f"{b['p50_ms'] - d['p50_ms']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    b = sub.add_parser("build")
    b.add_argument("--state", type=Path, required=True)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--calls", type=int, default=100, help="Calls per tool.")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.command == "build":
        build(args.state)
        return
    print(report(measure(args.backend, args.calls, args.out)))


if __name__ == "__main__":
    sys.exit(main())
