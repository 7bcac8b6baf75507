"""Ranking-quality evaluation of text search on a labelled corpus of real documentation.

Against a running deployment (loads the corpus into namespace `quality`, then queries it):
    .venv/bin/python bench/quality/evaluate.py --url http://127.0.0.1:8000 --token kb_... --backend-label sqlite

On its own (fresh SQLite and embedded PostgreSQL deployments, started and stopped here):
    .venv/bin/python bench/quality/evaluate.py --self-serve [--backends sqlite,postgres]

Every information need in queries.json is asked twice, as keywords and as a natural question, through
`GET /kb/search?q=...&limit=10&content_mode=none&namespace=quality`. Per phrasing it reports
recall@10 (share of the need's relevant documents in the top 10, averaged over needs) and MRR@10
(reciprocal rank of the first relevant document, 0 when none is in the top 10, averaged), plus
hit@1 and hit@10. Results go to stdout as markdown and to var/bench/search-quality-<backend>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"
QUERIES = HERE / "queries.json"
OUT_DIR = ROOT / "var" / "bench"
BIN = ROOT / ".venv" / "bin"
NAMESPACE = "quality"
K = 10
PHRASINGS = ("keywords", "question")
GUNICORN_OPTIONS = ("--workers", "2", "--threads", "4", "--timeout", "300", "--graceful-timeout", "10")


# --------------------------------------------------------------------------- data


@dataclass
class Need:
    id: str
    kind: str
    keywords: str
    question: str
    relevant: list[str]
    note: str = ""


def load_corpus(corpus: Path) -> dict[str, str]:
    return {p.relative_to(corpus).as_posix(): p.read_text() for p in sorted(corpus.rglob("*.md"))}


def load_needs(path: Path, corpus_paths: set[str]) -> list[Need]:
    raw = json.loads(path.read_text())
    needs = [
        Need(
            id=item["id"],
            kind=item.get("kind", ""),
            keywords=item["keywords"],
            question=item["question"],
            relevant=list(item["relevant"]),
            note=item.get("note", ""),
        )
        for item in raw["needs"]
    ]
    problems = []
    ids = [need.id for need in needs]
    problems += [f"duplicate id {i}" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for need in needs:
        if not need.relevant:
            problems.append(f"{need.id}: no relevant documents")
        problems += [f"{need.id}: {p} is not in the corpus" for p in need.relevant if p not in corpus_paths]
        if not need.keywords.strip() or not need.question.strip():
            problems.append(f"{need.id}: empty phrasing")
    if problems:
        raise SystemExit("queries.json is inconsistent:\n  " + "\n  ".join(problems))
    return needs


# --------------------------------------------------------------------------- API client


class Api:
    def __init__(self, url: str, token: str) -> None:
        self.client = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=120,
        )

    def close(self) -> None:
        self.client.close()

    def request(self, method: str, url: str, *, ok: tuple[int, ...] = (200,), **kwargs: Any) -> httpx.Response:
        response = self.client.request(method, url, **kwargs)
        if response.status_code not in ok:
            raise RuntimeError(f"{method} {url} answered {response.status_code}: {response.text[:500]}")
        return response

    def ensure_namespace(self, slug: str) -> None:
        found = self.request("GET", f"/kb/namespaces/{slug}", ok=(200, 404))
        if found.status_code == 404:
            self.request("POST", "/kb/namespaces", ok=(201,), json={"slug": slug, "display_name": "Search quality"})

    def put_document(self, namespace: str, path: str, content: str) -> str:
        body = {"namespace": namespace, "path": path, "content": content}
        response = self.request("PUT", "/kb/documents/by-path", ok=(200, 201, 409), json=body)
        if response.status_code == 409 and response.json().get("code") == "document_archived":
            # An earlier corpus dropped this page and we archived it: restore, then write.
            params = {"namespace": namespace, "path": path, "archive_filter": "all"}
            document = self.request("GET", "/kb/documents/by-path", params=params).json()
            self.request("PATCH", f"/kb/documents/{document['id']}", json={"archived": False})
            response = self.request("PUT", "/kb/documents/by-path", ok=(200, 201), json=body)
        elif response.status_code == 409:
            raise RuntimeError(f"PUT {path} answered 409: {response.text[:500]}")
        result = response.json()
        return "created" if result["created"] else "changed" if result["changed"] else "unchanged"

    def list_documents(self, namespace: str) -> Iterator[dict[str, Any]]:
        offset = 0
        while True:
            params = {"namespace": namespace, "limit": 100, "offset": offset}
            page = self.request("GET", "/kb/documents", params=params).json()
            yield from page["data"]
            offset += len(page["data"])
            if not page["data"] or offset >= page["total"]:
                return

    def archive(self, document_ids: list[str]) -> None:
        for start in range(0, len(document_ids), 50):
            targets = [{"document_id": i} for i in document_ids[start : start + 50]]
            self.request("POST", "/kb/documents/archive", json={"archived": True, "targets": targets})

    def search(self, query: str, namespace: str, limit: int) -> tuple[dict[str, Any], float]:
        params = {"q": query, "limit": limit, "content_mode": "none", "namespace": namespace}
        started = time.perf_counter()
        response = self.request("GET", "/kb/search", params=params)
        return response.json(), time.perf_counter() - started


def load_into(api: Api, corpus: dict[str, str], namespace: str, workers: int = 4) -> dict[str, int]:
    """Idempotent: identical content adds no version; pages no longer in the corpus are archived."""
    api.ensure_namespace(namespace)
    counts = {"created": 0, "changed": 0, "unchanged": 0, "archived": 0}
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for outcome in pool.map(lambda item: api.put_document(namespace, *item), sorted(corpus.items())):
            counts[outcome] += 1
    stale = [doc["id"] for doc in api.list_documents(namespace) if doc["path"] not in corpus]
    if stale:
        api.archive(stale)
        counts["archived"] = len(stale)
    print(
        f"loaded {len(corpus)} pages into '{namespace}' in {time.perf_counter() - started:.1f}s: "
        + ", ".join(f"{k} {v}" for k, v in counts.items()),
        file=sys.stderr,
    )
    return counts


# --------------------------------------------------------------------------- metrics


@dataclass
class Outcome:
    need: str
    kind: str
    phrasing: str
    query: str
    relevant: list[str]
    ranked: list[str]
    total: int
    relaxed: bool
    seconds: float
    first_rank: int | None = field(init=False)
    recall: float = field(init=False)
    reciprocal_rank: float = field(init=False)

    def __post_init__(self) -> None:
        self.first_rank = first_relevant_rank(self.ranked, self.relevant)
        self.recall = recall_at_k(self.ranked, self.relevant)
        self.reciprocal_rank = 1 / self.first_rank if self.first_rank else 0.0


def first_relevant_rank(ranked: list[str], relevant: list[str], k: int = K) -> int | None:
    """1-based rank of the first relevant page within the top k, or None."""
    for rank, path in enumerate(ranked[:k], start=1):
        if path in relevant:
            return rank
    return None


def recall_at_k(ranked: list[str], relevant: list[str], k: int = K) -> float:
    """Share of the relevant pages that appear in the top k."""
    return len(set(ranked[:k]) & set(relevant)) / len(set(relevant))


def summarise(outcomes: list[Outcome]) -> dict[str, float]:
    if not outcomes:
        return {}
    return {
        "queries": len(outcomes),
        "recall@10": statistics.fmean(o.recall for o in outcomes),
        "mrr@10": statistics.fmean(o.reciprocal_rank for o in outcomes),
        "hit@1": statistics.fmean(1.0 if o.first_rank == 1 else 0.0 for o in outcomes),
        "hit@10": statistics.fmean(1.0 if o.first_rank else 0.0 for o in outcomes),
        "zero_results": sum(1 for o in outcomes if o.total == 0),
        "relaxed": sum(1 for o in outcomes if o.relaxed),
        "median_ms": statistics.median(o.seconds for o in outcomes) * 1000,
    }


def run_queries(api: Api, needs: list[Need], namespace: str) -> list[Outcome]:
    outcomes = []
    for need in needs:
        for phrasing in PHRASINGS:
            query = getattr(need, phrasing)
            page, seconds = api.search(query, namespace, K)
            ranked = [hit["document"]["path"] for hit in page["data"]]
            outcomes.append(
                Outcome(
                    need=need.id,
                    kind=need.kind,
                    phrasing=phrasing,
                    query=query,
                    relevant=need.relevant,
                    ranked=ranked,
                    total=page["total"],
                    relaxed=bool(page.get("relaxed")),
                    seconds=seconds,
                )
            )
    return outcomes


# --------------------------------------------------------------------------- report


def report(label: str, outcomes: list[Outcome]) -> str:
    lines = [f"### Search quality: {label}", ""]
    lines += [
        "| phrasing | queries | recall@10 | MRR@10 | hit@1 | hit@10 | no results | relaxed | median ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for phrasing in PHRASINGS:
        s = summarise([o for o in outcomes if o.phrasing == phrasing])
        lines.append(
            f"| {phrasing} | {s['queries']} | {s['recall@10']:.3f} | {s['mrr@10']:.3f} | {s['hit@1']:.2f} | "
            f"{s['hit@10']:.2f} | {s['zero_results']} | {s['relaxed']} | {s['median_ms']:.0f} |"
        )
    kinds = sorted({o.kind for o in outcomes if o.kind})
    if kinds:
        lines += ["", "| kind | needs | recall@10 keywords | MRR@10 keywords | recall@10 question | MRR@10 question |"]
        lines.append("| --- | ---: | ---: | ---: | ---: | ---: |")
        for kind in kinds:
            kw = summarise([o for o in outcomes if o.kind == kind and o.phrasing == "keywords"])
            qu = summarise([o for o in outcomes if o.kind == kind and o.phrasing == "question"])
            lines.append(
                f"| {kind} | {kw['queries']} | {kw['recall@10']:.3f} | {kw['mrr@10']:.3f} | "
                f"{qu['recall@10']:.3f} | {qu['mrr@10']:.3f} |"
            )
    misses = [o for o in outcomes if o.recall < 1.0]
    lines += ["", f"Misses ({len(misses)} of {len(outcomes)} queries without every relevant page in the top {K}):", ""]
    for o in misses:
        found = f"first relevant at {o.first_rank}" if o.first_rank else "no relevant page in the top 10"
        lost = [p for p in o.relevant if p not in o.ranked[:K]]
        lines.append(f"- `{o.need}` {o.phrasing} `{o.query}`: {found}, {o.total} results; missing {', '.join(lost)}")
        lines.append(f"  - top 3: {', '.join(o.ranked[:3]) or '(none)'}")
    return "\n".join(lines)


def evaluate(
    url: str, token: str, label: str, *, corpus_dir: Path, queries: Path, skip_load: bool, out_dir: Path
) -> dict[str, Any]:
    corpus = load_corpus(corpus_dir)
    needs = load_needs(queries, set(corpus))
    api = Api(url, token)
    try:
        counts = {} if skip_load else load_into(api, corpus, NAMESPACE)
        outcomes = run_queries(api, needs, NAMESPACE)
    finally:
        api.close()
    print(report(label, outcomes))
    print()
    result = {
        "backend": label,
        "url": url,
        "namespace": NAMESPACE,
        "k": K,
        "corpus_pages": len(corpus),
        "corpus_bytes": sum(len(text.encode()) for text in corpus.values()),
        "needs": len(needs),
        "load": counts,
        "summary": {p: summarise([o for o in outcomes if o.phrasing == p]) for p in PHRASINGS},
        "by_kind": {
            kind: {p: summarise([o for o in outcomes if o.kind == kind and o.phrasing == p]) for p in PHRASINGS}
            for kind in sorted({o.kind for o in outcomes if o.kind})
        },
        "queries": [
            {
                "need": o.need,
                "kind": o.kind,
                "phrasing": o.phrasing,
                "query": o.query,
                "relevant": o.relevant,
                "ranked": o.ranked,
                "first_relevant_rank": o.first_rank,
                "recall@10": o.recall,
                "reciprocal_rank": o.reciprocal_rank,
                "total": o.total,
                "relaxed": o.relaxed,
                "ms": round(o.seconds * 1000, 1),
            }
            for o in outcomes
        ],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"search-quality-{label}.json"
    target.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {target}", file=sys.stderr)
    return result


# --------------------------------------------------------------------------- self-serve


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(database_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "DEBUG": "false",
            "DATABASE_URL": database_url,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "CELERY_TASK_ALWAYS_EAGER": "true",
            "LOG_LEVEL": "WARNING",
        }
    )
    env.pop("KNOWLEDGE_PUBLIC_URL", None)
    return env


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [str(BIN / "python"), "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


@contextmanager
def gunicorn(env: dict[str, str], log: Path) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("w") as handle:
        process = subprocess.Popen(
            [str(BIN / "gunicorn"), "config.wsgi", "--bind", f"127.0.0.1:{port}", *GUNICORN_OPTIONS],
            cwd=ROOT,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"gunicorn did not answer /health within 60s:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield url
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def database(backend: str, work: Path, *, keep: bool = False) -> Iterator[str]:
    """A fresh, empty database for one backend; removed afterwards (SQLite kept with keep=True)."""
    if backend == "sqlite":
        db = OUT_DIR / "quality.sqlite3"
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        files = [Path(f"{db}{suffix}") for suffix in ("", "-wal", "-shm")]
        for file in files:
            file.unlink(missing_ok=True)
        try:
            yield f"sqlite:///{db}"
        finally:
            if not keep:
                for file in files:
                    file.unlink(missing_ok=True)
        return
    datadir = work / "pg"
    helper = [str(BIN / "python"), "tests/embedded_pg.py"]
    started = subprocess.run([*helper, "start", str(datadir)], cwd=ROOT, capture_output=True, text=True, check=False)
    try:
        if started.returncode != 0:
            raise RuntimeError(f"embedded PostgreSQL did not start:\n{started.stdout}\n{started.stderr}")
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([*helper, "stop", str(datadir)], cwd=ROOT, capture_output=True, check=False)


def self_serve(backends: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    results = []
    work = Path(tempfile.mkdtemp(prefix="kb-quality."))
    try:
        for backend in backends:
            print(f"== {backend}: fresh deployment ==", file=sys.stderr)
            with database(backend, work, keep=args.keep_db) as database_url:
                env = server_env(database_url)
                manage(env, "migrate", "--noinput")
                bootstrap = manage(
                    env, "kb_bootstrap", "--workspace", "quality", "--user", "evaluator", "--role", "owner"
                )
                token = json.loads(bootstrap.strip().splitlines()[-1])["token"]
                with gunicorn(env, work / f"gunicorn-{backend}.log") as url:
                    results.append(
                        evaluate(
                            url,
                            token,
                            backend,
                            corpus_dir=args.corpus,
                            queries=args.queries,
                            skip_load=False,
                            out_dir=args.out_dir,
                        )
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def comparison(results: list[dict[str, Any]]) -> str:
    lines = ["### Search quality by backend", ""]
    lines.append("| backend | phrasing | recall@10 | MRR@10 | hit@1 | hit@10 |")
    lines.append("| --- | --- | ---: | ---: | ---: | ---: |")
    for result in results:
        for phrasing in PHRASINGS:
            s = result["summary"][phrasing]
            lines.append(
                f"| {result['backend']} | {phrasing} | {s['recall@10']:.3f} | {s['mrr@10']:.3f} | "
                f"{s['hit@1']:.2f} | {s['hit@10']:.2f} |"
            )
    return "\n".join(lines)


def _interrupt(signum: int, frame: Any) -> None:
    """SIGTERM unwinds like Ctrl-C, so the servers started here are stopped on the way out."""
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="base URL of a running deployment, e.g. http://127.0.0.1:8000")
    parser.add_argument("--token", default=os.environ.get("KB_TOKEN"), help="bearer token (default: $KB_TOKEN)")
    parser.add_argument("--backend-label", default="server", help="names the output file and the report")
    parser.add_argument("--self-serve", action="store_true", help="start fresh deployments, evaluate, stop them")
    parser.add_argument("--backends", default="sqlite,postgres", help="for --self-serve: sqlite,postgres")
    parser.add_argument("--skip-load", action="store_true", help="the corpus is already loaded; only query")
    parser.add_argument("--keep-db", action="store_true", help="for --self-serve: keep var/bench/quality.sqlite3")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--queries", type=Path, default=QUERIES)
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _interrupt)
    if args.self_serve:
        backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        unknown = set(backends) - {"sqlite", "postgres"}
        if unknown:
            parser.error(f"unknown backends: {', '.join(sorted(unknown))}")
        results = self_serve(backends, args)
        if len(results) > 1:
            print(comparison(results))
        return 0
    if not args.url or not args.token:
        parser.error("--url and --token (or $KB_TOKEN) are required without --self-serve")
    evaluate(
        args.url,
        args.token,
        args.backend_label,
        corpus_dir=args.corpus,
        queries=args.queries,
        skip_load=args.skip_load,
        out_dir=args.out_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
