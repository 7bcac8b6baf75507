"""Benchmark of `agor kb export` / `agor kb import` end to end over HTTP (gunicorn, a real corpus).

`python -m bench.transfer_bench [--scale full|quick] [--backend sqlite|postgres] [--out FILE]`
runs everything itself: a fresh database (a SQLite file under var/bench/ or an embedded
PostgreSQL in a temp dir), `manage.py migrate`, the corpus loaded in-process through the
services, gunicorn on a free loopback port (on PostgreSQL with a Celery worker on Redis for the
after-commit upkeep, as the Procfile runs it, when `BENCH_REDIS_URL_TRANSFER` answers), then the
CLI as subprocesses:

1. full export into a fresh folder (wall time and the CLI's peak RSS),
2. re-export after 100 documents changed, 3. `validate`,
4. full import into a new namespace, 5. a no-change re-import (`--resume --apply`),
6. resumes after SIGKILL at seeded random points, for export and for import, reporting how much
   already-finished work the resume redid.

Prints a markdown table and writes the numbers as JSON. Subcommands `build` and `mutate` are the
in-process (Django) steps; everything measured talks HTTP only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.knowledge_bench import upkeep_backlog

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"
PYTHON = str(BIN / "python") if (BIN / "python").exists() else sys.executable
MIB = 1024 * 1024
SEED = 20261202
SOURCE = "bench-transfer"
# PostgreSQL is served as the Procfile runs it when this Redis answers; otherwise eagerly.
UPKEEP_BROKER = os.environ.get("BENCH_REDIS_URL_TRANSFER", "redis://127.0.0.1:6379/14")
AIMS = {
    "export_full_s": 60,
    "export_rss_mib": 256,
    "reexport_100_s": 5,
    "import_full_s": 120,
    "reimport_unchanged_s": 15,
}


@dataclass(frozen=True)
class Scale:
    name: str
    documents: int
    total_bytes: int
    changed: int
    kills: int
    import_kills: int


SCALES = {
    # Just under the 100 MiB transfer limit: rewritten links and the 100 edits add a little.
    "full": Scale("full", 10_000, 98 * MIB, 100, 3, 1),
    "quick": Scale("quick", 1_000, 10 * MIB, 100, 2, 2),
}


# --- in-process steps (Django) -------------------------------------------------------------


def _django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def _sizes(scale: Scale, rng: random.Random) -> list[int]:
    raw = [rng.lognormvariate(math.log(6000), 0.9) for _ in range(scale.documents)]
    factor = scale.total_bytes / sum(raw)
    return [max(200, min(2 * MIB, int(size * factor))) for size in raw]


WORDS = [
    "deploy",
    "rollback",
    "incident",
    "runbook",
    "certificate",
    "rotate",
    "cluster",
    "queue",
    "retry",
    "latency",
    "budget",
    "owner",
    "review",
    "decision",
    "context",
    "branch",
    "session",
    "agent",
    "memory",
    "prompt",
    "schema",
    "migration",
    "index",
    "cache",
    "token",
    "secret",
]


def _body(index: int, size: int, rng: random.Random, paths: list[str], ids: list[str]) -> str:
    lines = [f"# Topic {index}", ""]
    if index and rng.random() < 0.6:
        target = rng.randrange(index)
        lines.append(
            f"See [earlier](agor://kb/{SOURCE}/{paths[target]}#notes) and [by id](agor://kb/document/{ids[target]})."
        )
        lines.append("")
    if rng.random() < 0.3:
        lines += ["```python", "print('[not a link](agor://kb/x/y.md)')", "```", ""]
    length = sum(len(line) + 1 for line in lines)
    while length < size:
        sentence = " ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + "."
        lines.append(sentence)
        length += len(sentence) + 1
    return "\n".join(lines) + "\n"


def build(scale: Scale, state: Path) -> None:
    """Load the corpus through the services, in batched transactions; write tokens to `state`."""
    _django()
    from django.db import transaction

    from knowledge.services import document_create
    from workspaces.access import actor_for
    from workspaces.services import membership_set, namespace_create, token_issue, user_ensure, workspace_ensure

    workspace = workspace_ensure(slug="bench", name="Bench")
    admin = user_ensure(username="bench-admin")
    member = user_ensure(username="bench-member")
    membership_set(workspace=workspace, user=admin, role="admin")
    membership_set(workspace=workspace, user=member, role="member")
    actor = actor_for(admin, workspace)
    namespace = namespace_create(actor=actor, slug=SOURCE, display_name="Transfer bench")
    rng = random.Random(SEED)
    sizes = _sizes(scale, rng)
    paths = [f"area-{i % 25:02d}/topic-{i:05d}.md" for i in range(scale.documents)]
    ids: list[str] = []
    started = time.perf_counter()
    for start in range(0, scale.documents, 200):
        with transaction.atomic():
            for index in range(start, min(start + 200, scale.documents)):
                doc = document_create(
                    actor=actor,
                    namespace=namespace,
                    path=paths[index],
                    content=_body(index, sizes[index], rng, paths, ids),
                    status="draft" if index % 20 == 0 else "published",
                    visibility="private" if index % 10 == 0 else None,
                )
                ids.append(str(doc.pk))
    _, admin_token = token_issue(user=admin, workspace=workspace, name="bench")
    _, member_token = token_issue(user=member, workspace=workspace, name="bench")
    state.write_text(
        json.dumps(
            {
                "admin_token": admin_token,
                "member_token": member_token,
                "documents": scale.documents,
                "bytes": sum(sizes),
                "build_seconds": round(time.perf_counter() - started, 1),
            }
        )
    )


def mutate(count: int) -> None:
    """Revise `count` documents (deterministically chosen) as the admin."""
    _django()
    from knowledge.models import Document
    from knowledge.services import document_revise
    from workspaces.access import actor_for
    from workspaces.models import Workspace

    workspace = Workspace.objects.get(slug="bench")
    docs = list(Document.objects.filter(namespace__slug=SOURCE, archived=False).order_by("path"))
    actor = actor_for(docs[0].created_by, workspace)
    for doc in random.Random(SEED + 1).sample(docs, count):
        document_revise(actor=actor, document_id=doc.pk, content=doc.current_version.content + "\nChanged.\n")


# --- measuring (HTTP only) -----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def agor(args: list[str], env: dict[str, str], *, kill_after: int | None = None) -> dict[str, Any]:
    """Run the CLI: wall time, exit status and its JSON summary."""
    run_env = dict(env)
    if kill_after is not None:
        run_env["AGOR_TRANSFER_KILL_AFTER"] = str(kill_after)
    started = time.perf_counter()
    proc = subprocess.run(
        [PYTHON, "-m", "transfer.cli", *args], env=run_env, cwd=str(ROOT), capture_output=True, start_new_session=True
    )
    try:
        summary = json.loads(proc.stdout or b"{}")
    except ValueError:
        summary = {}
    return {
        "code": proc.returncode,
        "seconds": round(time.perf_counter() - started, 2),
        "summary": summary,
        "stderr": proc.stderr,
    }


def _child_rss(args: list[str], env: dict[str, str]) -> tuple[dict[str, Any], float]:
    """Like agor(), but measures the child's own peak RSS and CPU time with wait4."""
    started = time.perf_counter()
    with open(os.devnull, "wb") as devnull, tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            [PYTHON, "-m", "transfer.cli", *args], env=env, cwd=str(ROOT), stdout=out, stderr=devnull
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        out.seek(0)
        summary = json.loads(out.read() or b"{}")
    cpu = usage.ru_utime + usage.ru_stime  # the CLI's own share of the machine
    return {
        "code": proc.returncode,
        "seconds": round(seconds, 2),
        "cli_cpu_seconds": round(cpu, 2),
        "summary": summary,
    }, usage.ru_maxrss / 1024


def wait_healthy(url: str, timeout: float = 60) -> None:
    import httpx2

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit("gunicorn did not become healthy")


def check(step: str, result: dict[str, Any]) -> None:
    if result["code"] != 0:
        tail = result.get("stderr", b"")[-2000:].decode("utf-8", "replace")
        raise SystemExit(f"{step} failed (exit {result['code']}):\n{tail}")


def resumes(
    kind: str, work: Path, export_dir: Path, env: dict[str, str], documents: int, kills: int, total_steps: int
) -> list[dict[str, Any]]:
    """SIGKILL at seeded random response counts, then resume: what was kept, what the resume did."""
    rng = random.Random(SEED + (7 if kind == "export" else 13))
    results = []
    for attempt in range(kills):
        kill_after = rng.randint(2, max(3, total_steps))
        if kind == "export":
            target = work / f"killed-export-{attempt}"
            args = ["kb", "export", "--namespace", SOURCE, "--output", str(target), "--resume"]
        else:
            args = ["kb", "import", str(export_dir), "--namespace", f"bench-killed-{attempt}", "--apply", "--resume"]
        killed = agor(args, env, kill_after=kill_after)
        if kind == "export":
            snapshot = target / ".agor" / "snapshot"
            kept = len(list(snapshot.iterdir())) if snapshot.exists() else 0
            lock = target / ".agor-lock"
            if lock.exists():  # what the lock looks like 30 s after a hard exit
                past = time.time() - 31
                os.utime(lock, (past, past))
        resumed = agor(args, env)
        check(f"{kind} resume", resumed)
        summary = resumed["summary"]
        if kind == "export":
            redone = summary.get("copied", 0) - (documents - kept)
        else:
            # Kept: what the killed run finished, including requests that were still in flight
            # when it died and committed while the resume planned (the resume skips those).
            kept = summary.get("unchanged", 0) + summary.get("skipped", 0)
            redone = summary.get("created", 0) + kept - documents
        results.append(
            {
                "attempt": attempt,
                "kill_after_responses": kill_after,
                "killed_exit": killed["code"],
                "resume_seconds": resumed["seconds"],
                "kept": kept,
                "redone": redone,
            }
        )
    return results


def _redis_answers(url: str) -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(url, socket_connect_timeout=2).ping())
    except Exception:
        return False


def measure(scale: Scale, backend: str, out: Path, keep: bool) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="kb-tbench."))
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
    gunicorn = worker = None
    sqlite = ROOT / "var" / "bench" / f"transfer-{backend}.sqlite3"
    try:
        if backend == "sqlite":
            sqlite.parent.mkdir(parents=True, exist_ok=True)
            for suffix in ("", "-wal", "-shm"):
                Path(f"{sqlite}{suffix}").unlink(missing_ok=True)
            env["DATABASE_URL"] = f"sqlite:///{sqlite}"
        else:
            pg_dir = work / "pg"
            url = (
                subprocess.run(
                    [PYTHON, "tests/embedded_pg.py", "start", str(pg_dir)], cwd=ROOT, check=True, capture_output=True
                )
                .stdout.decode()
                .strip()
            )
            env["DATABASE_URL"] = url
        subprocess.run(
            [PYTHON, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True
        )
        state = work / "state.json"
        started = time.perf_counter()
        subprocess.run(
            [PYTHON, "-m", "bench.transfer_bench", "build", "--scale", scale.name, "--state", str(state)],
            cwd=ROOT, env=env, check=True,
        )  # fmt: skip
        facts = json.loads(state.read_text())
        print(f"corpus loaded in {time.perf_counter() - started:.0f}s", file=sys.stderr)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server_env, broker = dict(env), None
        if backend == "postgres" and _redis_answers(UPKEEP_BROKER):
            # As the Procfile runs it: after-commit upkeep (chunks, outlines, links) on a worker.
            broker = UPKEEP_BROKER
            server_env.update(CELERY_TASK_ALWAYS_EAGER="false", REDIS_URL=broker)
            import redis

            redis.Redis.from_url(broker).flushdb()
            worker = subprocess.Popen(
                ["nice", "-n", "10", str(BIN / "celery"), "-A", "config.celery_app", "worker", "--pool=solo",
                 "--loglevel=WARNING",
                 "--without-gossip", "--without-mingle", "--without-heartbeat"],
                cwd=ROOT, env=server_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        gunicorn = subprocess.Popen(
            [
                str(BIN / "gunicorn"),
                "config.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "2",
                "--threads",
                "4",
                "--timeout",
                "300",
                "--error-logfile",
                str(work / "gunicorn.log"),
            ],
            cwd=ROOT,
            env=server_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_healthy(base)
        admin = {**env, "AGOR_URL": base, "AGOR_TOKEN": facts["admin_token"], "AGOR_CONFIG_DIR": str(work / "cfg")}
        member = {**admin, "AGOR_TOKEN": facts["member_token"]}
        for name in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL"):
            admin.pop(name, None)
            member.pop(name, None)
        export_dir = work / "export"
        export_args = ["kb", "export", "--namespace", SOURCE, "--output", str(export_dir)]
        rows: dict[str, Any] = {}

        full, rss = _child_rss(export_args, admin)
        check("export", full)
        rows["export_full"] = {**full, "rss_mib": round(rss, 1)}
        subprocess.run(
            [PYTHON, "-m", "bench.transfer_bench", "mutate", "--count", str(scale.changed)],
            cwd=ROOT,
            env=env,
            check=True,
        )
        reexport = agor(export_args, admin)
        check("re-export", reexport)
        rows["reexport_changed"] = reexport
        validate = agor(["kb", "validate", str(export_dir)], admin)
        check("validate", validate)
        rows["validate"] = validate
        import_args = ["kb", "import", str(export_dir), "--namespace", "bench-imported", "--apply"]
        imported, import_rss = _child_rss(import_args, member)
        check("import", imported)
        rows["import_full"] = {**imported, "rss_mib": round(import_rss, 1)}
        if broker is not None:
            rows["import_full"]["upkeep"] = upkeep_backlog(broker)
        again = agor([*import_args, "--resume"], member)
        check("re-import", again)
        rows["reimport_unchanged"] = again

        count = facts["documents"]
        export_steps = count // 100 + count // 500 + 2
        rows["export_resumes"] = resumes("export", work, export_dir, admin, count, scale.kills, export_steps)
        rows["import_resumes"] = resumes("import", work, export_dir, member, count, scale.import_kills, count // 50 + 3)
        result = {"scale": scale.name, "backend": backend, "corpus": facts, "results": rows, "aims": AIMS}
        for row in rows.values():
            if isinstance(row, dict):
                row.pop("stderr", None)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1, default=str))
        return result
    finally:
        for process in (gunicorn, worker):
            if process is not None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)
        if pg_dir is not None:
            subprocess.run([PYTHON, "tests/embedded_pg.py", "stop", str(pg_dir)], cwd=ROOT, check=False)
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
            if backend == "sqlite":
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{sqlite}{suffix}").unlink(missing_ok=True)


def report(result: dict[str, Any]) -> str:
    rows = result["results"]
    corpus = result["corpus"]
    lines = [
        f"### Transfer ({result['backend']}, {result['scale']}: {corpus['documents']} documents, "
        f"{corpus['bytes'] / MIB:.0f} MiB)",
        "",
        "| step | seconds | peak RSS MiB | notes |",
        "| --- | ---: | ---: | --- |",
    ]

    def row(name: str, key: str, note: str = "") -> None:
        data = rows[key]
        rss = data.get("rss_mib")
        lines.append(f"| {name} | {data['seconds']:.1f} | {'' if rss is None else f'{rss:.0f}'} | {note} |")

    full = rows["export_full"]["summary"]
    export_cpu = rows["export_full"].get("cli_cpu_seconds")
    row("full export", "export_full", f"{full.get('copied')} bodies, CLI CPU {export_cpu} s, aim ≤ 60 s / 256 MiB")
    re = rows["reexport_changed"]["summary"]
    row(
        "re-export, 100 changed",
        "reexport_changed",
        f"{re.get('copied')} fetched, {re.get('written')} files written, aim ≤ 5 s",
    )
    row("validate", "validate", f"{rows['validate']['summary'].get('documents')} documents")
    imp = rows["import_full"]["summary"]
    upkeep = rows["import_full"].get("upkeep")
    drained = (
        f"; after-commit upkeep on the Celery worker: {upkeep['queued_when_clients_stopped']} tasks queued at the "
        f"end, drained {upkeep['drained_seconds']:.1f} s later"
        if upkeep
        else "; after-commit upkeep inside each request (Celery eager)"
    )
    row(
        "full import",
        "import_full",
        f"{imp.get('created')} created, {imp.get('references')} references, "
        f"CLI CPU {rows['import_full'].get('cli_cpu_seconds')} s, aim ≤ 120 s{drained}",
    )
    again = rows["reimport_unchanged"]["summary"]
    row("no-change re-import", "reimport_unchanged", f"{again.get('unchanged')} unchanged, aim ≤ 15 s")
    for kind in ("export", "import"):
        for attempt in rows[f"{kind}_resumes"]:
            lines.append(
                f"| {kind} resume after SIGKILL (after {attempt['kill_after_responses']} responses) | "
                f"{attempt['resume_seconds']:.1f} |  | kept {attempt['kept']}, "
                f"redone {attempt['redone']} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    b = sub.add_parser("build")
    b.add_argument("--scale", choices=SCALES, default="quick")
    b.add_argument("--state", type=Path, required=True)
    m = sub.add_parser("mutate")
    m.add_argument("--count", type=int, default=100)
    parser.add_argument("--scale", choices=SCALES, default="full")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--keep", action="store_true", help="Keep the temp folder and database.")
    args = parser.parse_args()
    if args.command == "build":
        build(SCALES[args.scale], args.state)
    elif args.command == "mutate":
        mutate(args.count)
    else:
        suffix = "" if args.scale == "full" else f"-{args.scale}"
        out = args.out or ROOT / "var" / "bench" / f"transfer-{args.backend}{suffix}.json"
        result = measure(SCALES[args.scale], args.backend, out, args.keep)
        print(report(result))
        print(f"Raw numbers: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
