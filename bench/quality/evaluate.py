"""Ranking-quality evaluation of text, semantic and hybrid search on a labelled corpus of real documentation.

Against a running deployment (loads the corpus into namespace `quality`, then queries it):
    .venv/bin/python bench/quality/evaluate.py --url http://127.0.0.1:8000 --token kb_... --backend-label sqlite

On its own (fresh SQLite and embedded PostgreSQL deployments, started and stopped here):
    .venv/bin/python bench/quality/evaluate.py --self-serve [--backends sqlite,postgres] [--modes text,semantic,hybrid]

Every information need in queries.json is asked twice, as keywords and as a natural question, through
`GET /kb/search?q=...&mode=<mode>&limit=10&content_mode=none&namespace=quality`. Per mode and phrasing
it reports recall@10 (share of the need's relevant documents in the top 10, averaged over needs) and
MRR@10 (reciprocal rank of the first relevant document, 0 when none is in the top 10, averaged), plus
hit@1 and hit@10. Semantic and hybrid need PostgreSQL + pgvector; with --self-serve they use the
offline `local` provider (all-MiniLM-L6-v2), indexed by the project's pipeline (index_embeddings.py).
Results go to stdout as markdown and to var/bench/search-quality-<backend>[-<mode>].json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
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
MODES = ("text", "semantic", "hybrid")
SEMANTIC_MODES = ("semantic", "hybrid")
SUBSET_SEED = 20261204
# The offline model; indexing stays paused while the corpus loads, so no request embeds.
LOCAL_POLICY = {
    "enabled": True,
    "provider": "local",
    "model": "all-MiniLM-L6-v2",
    "dimensions": 384,
    "indexing": {"paused": True, "batch_size": 32},
}
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


def subset(corpus: dict[str, str], needs: list[Need], pages: int) -> dict[str, str]:
    """Every relevant page plus a fixed sample of the others, `pages` in all (at least the relevant ones)."""
    relevant = {path for need in needs for path in need.relevant}
    others = sorted(set(corpus) - relevant)
    keep = relevant | set(random.Random(SUBSET_SEED).sample(others, max(0, min(len(others), pages - len(relevant)))))
    return {path: text for path, text in corpus.items() if path in keep}


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

    def search(
        self, query: str, namespace: str, limit: int, mode: str = "text", rrf_k: int | None = None
    ) -> tuple[dict[str, Any], float]:
        params = {"q": query, "mode": mode, "limit": limit, "content_mode": "none", "namespace": namespace}
        if rrf_k is not None and mode == "hybrid":
            params["rrf_k"] = rrf_k
        started = time.perf_counter()
        response = self.request("GET", "/kb/search", params=params)
        return response.json(), time.perf_counter() - started

    def semantic_policy(self, patch: dict[str, Any]) -> dict[str, Any]:
        return self.request("PATCH", "/kb/settings/semantic", json=patch).json()

    def semantic_status(self) -> dict[str, Any]:
        return self.request("GET", "/kb/settings/semantic/status").json()


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
    mode: str = "text"
    effective_mode: str = "text"
    embed_ms: float | None = None
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
        "fell_back": sum(1 for o in outcomes if o.effective_mode != o.mode),
    }


def run_queries(
    api: Api, needs: list[Need], namespace: str, mode: str = "text", rrf_k: int | None = None
) -> list[Outcome]:
    outcomes = []
    for need in needs:
        for phrasing in PHRASINGS:
            query = getattr(need, phrasing)
            page, seconds = api.search(query, namespace, K, mode, rrf_k)
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
                    mode=mode,
                    effective_mode=page.get("effective_mode", mode),
                    embed_ms=(page.get("timings") or {}).get("embed_ms"),
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
    fell_back = [o for o in outcomes if o.effective_mode != o.mode]
    if fell_back:
        lines += ["", f"**{len(fell_back)} queries were answered by text search instead of {fell_back[0].mode}.**"]
    embeds = [o.embed_ms for o in outcomes if o.embed_ms is not None]
    if embeds:
        lines += ["", f"Query embedding: median {statistics.median(embeds):.0f} ms (included in the latencies above)."]
    misses = [o for o in outcomes if o.recall < 1.0]
    lines += ["", f"Misses ({len(misses)} of {len(outcomes)} queries without every relevant page in the top {K}):", ""]
    for o in misses:
        found = f"first relevant at {o.first_rank}" if o.first_rank else "no relevant page in the top 10"
        lost = [p for p in o.relevant if p not in o.ranked[:K]]
        lines.append(f"- `{o.need}` {o.phrasing} `{o.query}`: {found}, {o.total} results; missing {', '.join(lost)}")
        lines.append(f"  - top 3: {', '.join(o.ranked[:3]) or '(none)'}")
    return "\n".join(lines)


def _result(
    label: str, mode: str, url: str, corpus: dict[str, str], needs: list[Need], outcomes: list[Outcome], **extra: Any
) -> dict[str, Any]:
    return {
        "backend": label,
        "mode": mode,
        "url": url,
        "namespace": NAMESPACE,
        "k": K,
        "corpus_pages": len(corpus),
        "corpus_bytes": sum(len(text.encode()) for text in corpus.values()),
        "needs": len(needs),
        **extra,
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
                "effective_mode": o.effective_mode,
                "ms": round(o.seconds * 1000, 1),
                "embed_ms": o.embed_ms,
            }
            for o in outcomes
        ],
    }


def check_semantic(api: Api) -> dict[str, Any]:
    """The deployment's index status; refuses to measure an index that cannot answer."""
    status = api.semantic_status()
    if status.get("unavailable_reason") or not status.get("pgvector_ready"):
        raise SystemExit(f"semantic search is unavailable: {status.get('unavailable_reason') or status.get('reason')}")
    if status["queue_depth"] or status["chunks"]["failed"]:
        print(
            f"warning: the index is incomplete ({status['queue_depth']} chunks queued, "
            f"{status['chunks']['failed']} failed); semantic results will miss those chunks",
            file=sys.stderr,
        )
    return {k: status[k] for k in ("provider", "model", "dimensions", "chunks", "queue_depth", "last_error")}


def evaluate(
    url: str,
    token: str,
    label: str,
    *,
    corpus: dict[str, str],
    needs: list[Need],
    modes: list[str],
    skip_load: bool,
    out_dir: Path,
    before_queries: Callable[[], dict[str, Any]] | None = None,
    rrf_k: int | None = None,
) -> list[dict[str, Any]]:
    """Load (unless skip_load), run `before_queries` (indexing), then measure each mode; one result per mode."""
    api = Api(url, token)
    results = []
    try:
        counts = {} if skip_load else load_into(api, corpus, NAMESPACE)
        indexing = before_queries() if before_queries else None
        index_status = check_semantic(api) if any(m in SEMANTIC_MODES for m in modes) else None
        for mode in modes:
            started = time.perf_counter()
            outcomes = run_queries(api, needs, NAMESPACE, mode, rrf_k)
            seconds = time.perf_counter() - started
            tuned = rrf_k is not None and mode == "hybrid"
            name = label if mode == "text" else f"{label}, {mode}" + (f" (rrf_k={rrf_k})" if tuned else "")
            print(report(name, outcomes))
            print()
            extra: dict[str, Any] = {"load": counts, "query_seconds": round(seconds, 1)}
            if mode in SEMANTIC_MODES:
                extra.update({"indexing": indexing, "index_status": index_status})
            if tuned:
                extra["rrf_k"] = rrf_k
            result = _result(label, mode, url, corpus, needs, outcomes, **extra)
            out_dir.mkdir(parents=True, exist_ok=True)
            name = label if mode == "text" else f"{label}-{mode}" + (f"-rrf{rrf_k}" if tuned else "")
            target = out_dir / f"search-quality-{name}.json"
            target.write_text(json.dumps(result, indent=1) + "\n")
            print(f"{mode}: {len(outcomes)} queries in {seconds:.0f}s; wrote {target}", file=sys.stderr)
            results.append(result)
    finally:
        api.close()
    return results


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


def index_embeddings(env: dict[str, str], log: Path) -> dict[str, Any]:
    """Embed the loaded corpus with the project's pipeline in a separate process (see index_embeddings.py)."""
    print("indexing with the local model (progress in this log)...", file=sys.stderr)
    started = time.perf_counter()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as handle:
        process = subprocess.run(
            [str(BIN / "python"), str(HERE / "index_embeddings.py"), "--workspace", "quality", "--user", "evaluator"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=handle,
            text=True,
            check=False,
        )
    tail = log.read_text()[-3000:]
    if process.returncode != 0:
        raise RuntimeError(f"indexing failed ({process.returncode}):\n{process.stdout}\n{tail}")
    result = json.loads(process.stdout.strip().splitlines()[-1])
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    print(
        f"indexed {result['embedded_now']} chunks in {result['seconds']}s ({result['chunks_per_s']} chunks/s)",
        file=sys.stderr,
    )
    return result


def self_serve(
    backends: list[str], modes: list[str], corpus: dict[str, str], needs: list[Need], args: argparse.Namespace
) -> list[dict[str, Any]]:
    results = []
    work = Path(tempfile.mkdtemp(prefix="kb-quality."))
    try:
        for backend in backends:
            backend_modes = modes if backend == "postgres" else [m for m in modes if m not in SEMANTIC_MODES]
            if backend_modes != modes:
                print(f"{backend}: semantic and hybrid need PostgreSQL + pgvector; text only", file=sys.stderr)
            if not backend_modes:
                continue
            semantic = any(m in SEMANTIC_MODES for m in backend_modes)
            print(f"== {backend}: fresh deployment ==", file=sys.stderr)
            with database(backend, work, keep=args.keep_db) as database_url:
                env = server_env(database_url)
                manage(env, "migrate", "--noinput")
                bootstrap = manage(
                    env, "kb_bootstrap", "--workspace", "quality", "--user", "evaluator", "--role", "owner"
                )
                token = json.loads(bootstrap.strip().splitlines()[-1])["token"]
                with gunicorn(env, work / f"gunicorn-{backend}.log") as url:
                    if semantic:
                        api = Api(url, token)
                        try:
                            api.semantic_policy(LOCAL_POLICY)
                        finally:
                            api.close()
                    log = args.out_dir / f"search-quality-{backend}-indexing.log"
                    results += evaluate(
                        url,
                        token,
                        backend,
                        corpus=corpus,
                        needs=needs,
                        modes=backend_modes,
                        skip_load=False,
                        out_dir=args.out_dir,
                        before_queries=(lambda env=env, log=log: index_embeddings(env, log)) if semantic else None,
                        rrf_k=args.rrf_k,
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def _mode(result: dict[str, Any]) -> str:
    return result["mode"] + (f" (rrf_k={result['rrf_k']})" if result.get("rrf_k") else "")


def comparison(results: list[dict[str, Any]]) -> str:
    lines = ["### Search quality by backend and mode", ""]
    lines.append("| backend | mode | phrasing | recall@10 | MRR@10 | hit@1 | hit@10 | median ms |")
    lines.append("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for result in results:
        for phrasing in PHRASINGS:
            s = result["summary"][phrasing]
            lines.append(
                f"| {result['backend']} | {_mode(result)} | {phrasing} | {s['recall@10']:.3f} | {s['mrr@10']:.3f} | "
                f"{s['hit@1']:.2f} | {s['hit@10']:.2f} | {s['median_ms']:.0f} |"
            )
    kinds = sorted({kind for result in results for kind in result["by_kind"]})
    if len(results) > 1 and kinds:
        columns = [f"{r['backend']} {_mode(r)}" for r in results]
        lines += ["", "recall@10 / MRR@10 by kind of need (keywords and question together):", ""]
        lines.append("| kind | " + " | ".join(columns) + " |")
        lines.append("| --- |" + " ---: |" * len(columns))
        for kind in kinds:
            cells = []
            for result in results:
                queries = [q for q in result["queries"] if q["kind"] == kind]
                recall = statistics.fmean(q["recall@10"] for q in queries)
                mrr = statistics.fmean(q["reciprocal_rank"] for q in queries)
                cells.append(f"{recall:.3f} / {mrr:.3f}")
            lines.append(f"| {kind} | " + " | ".join(cells) + " |")
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
    parser.add_argument(
        "--modes",
        default="text",
        help="search modes to measure: text,semantic,hybrid (semantic and hybrid: PostgreSQL only with --self-serve)",
    )
    parser.add_argument(
        "--subset",
        type=int,
        metavar="PAGES",
        help="use only PAGES pages: every relevant page plus a fixed sample of the rest (fewer distractors, "
        "so the numbers are not comparable with a full run)",
    )
    parser.add_argument(
        "--rrf-k", type=int, help="hybrid: the reciprocal rank fusion constant to send (default: the server's, 60)"
    )
    parser.add_argument("--skip-load", action="store_true", help="the corpus is already loaded; only query")
    parser.add_argument("--keep-db", action="store_true", help="for --self-serve: keep var/bench/quality.sqlite3")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--queries", type=Path, default=QUERIES)
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _interrupt)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - set(MODES)
    if unknown or not modes:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))} (choose from {', '.join(MODES)})")
    corpus = load_corpus(args.corpus)
    needs = load_needs(args.queries, set(corpus))
    if args.subset:
        corpus = subset(corpus, needs, args.subset)
        print(f"subset: {len(corpus)} pages (all relevant pages included)", file=sys.stderr)
    if args.self_serve:
        backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        unknown = set(backends) - {"sqlite", "postgres"}
        if unknown:
            parser.error(f"unknown backends: {', '.join(sorted(unknown))}")
        results = self_serve(backends, modes, corpus, needs, args)
        if len(results) > 1:
            print(comparison(results))
        return 0
    if not args.url or not args.token:
        parser.error("--url and --token (or $KB_TOKEN) are required without --self-serve")
    results = evaluate(
        args.url,
        args.token,
        args.backend_label,
        corpus=corpus,
        needs=needs,
        modes=modes,
        skip_load=args.skip_load,
        out_dir=args.out_dir,
        rrf_k=args.rrf_k,
    )
    if len(results) > 1:
        print(comparison(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
