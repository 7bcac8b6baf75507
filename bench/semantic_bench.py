"""Semantic-search benchmark on PostgreSQL + pgvector, over the corpus `bench/run.sh` built.

`python -m bench.semantic_bench --state STATE --scale full|quick --out FILE` runs in-process
(Django settings from the environment, `DATABASE_URL` pointing at the benchmark database) after
the API measurement. It embeds through a loopback OpenAI-compatible server (hashed bag-of-words
vectors, 384 dimensions: the size of the local MiniLM), so latency and recall are measured on
real HNSW graphs without a paid provider. It reports

1. pipeline overhead: chunking, hashing and database writes (chunks/s, no provider), a transaction
   per document as each save's task runs it and in batches as a reindex does;
2. indexing throughput through the claim pipeline with the loopback provider, and the local
   MiniLM's own throughput on corpus chunks;
3. semantic and hybrid latency (p50/p95, query embedding excluded and reported separately) for an
   admin and for readers of 10% and 2% of the namespaces, next to the raw pgvector query;
4. recall@10 of the semantic leg against an exact scan over the permitted rows, per ACL case
   (distance-based, as ANN benchmarks count it, next to the plain overlap of the two top 10s),
   and how often a page came back short while enough matches existed;
5. hybrid recall@10 against the better single leg on labelled queries built from the corpus;
6. freshness: seconds from an edit's commit until semantic search in its namespace finds the new text, with a
   real Celery worker on Redis.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
SEED = 20261203
DIMENSIONS = 384
KEY = "sk-bench-loopback"
USERS = ("admin", "reader10", "reader2")
NONCE_WORDS = ["zephyr", "quokka", "marimba", "tundra", "lantern", "walrus", "saffron", "glacier", "origami", "cobalt"]
SCALES = {
    "full": {"overhead_docs": 1000, "latency_queries": 200, "labelled": 250, "local_chunks": 256, "fresh": 20},
    "quick": {"overhead_docs": 200, "latency_queries": 60, "labelled": 200, "local_chunks": 64, "fresh": 8},
}
# Orders the corpus fixes (ids are random per run), so seeded samples pick the same rows every run.
DOCUMENT_ORDER = ("namespace__slug", "path")
CHUNK_ORDER = ("document__namespace__slug", "document__path", "ordinal")
AIMS = {"semantic_p95_ms": 30, "hybrid_p95_ms": 80, "recall": 0.95, "overhead_chunks_s": 2000, "fresh_p95_s": 10}


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def summary(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 0.5), 2), "p95": round(percentile(values, 0.95), 2), "n": len(values)}


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    import django

    django.setup()


class Bench:
    def __init__(self, scale: str, state_path: Path) -> None:
        from django.contrib.auth import get_user_model
        from django.test import Client

        from tests.embedding_server import EmbeddingServer
        from workspaces.access import actor_for
        from workspaces.models import Workspace

        User = get_user_model()  # noqa: N806

        self.scale = scale
        self.sizes = SCALES[scale]
        self.state_path = state_path
        self.state = json.loads(state_path.read_text())
        self.rng = random.Random(SEED)
        self.workspace = Workspace.objects.get(slug="bench")
        self.actors = {name: actor_for(User.objects.get(username=f"bench-{name}"), self.workspace) for name in USERS}
        self.server = EmbeddingServer(dimensions=DIMENSIONS, api_key=KEY).start()
        self.client = Client(SERVER_NAME="localhost")
        self.results: dict[str, Any] = {"scale": scale}

    # --- indexing ------------------------------------------------------------------------------

    def enable(self) -> None:
        from workspaces import semantic

        patch = {
            "enabled": True,
            "provider": "openai-compatible",
            "model": "loopback-bag-of-words",
            "dimensions": DIMENSIONS,
            "base_url": self.server.url,
            "api_key": KEY,
            "indexing": {"paused": True, "batch_size": 128},
        }
        semantic.policy_update(actor=self.actors["admin"], patch=patch)

    def _set_paused(self, paused: bool) -> None:
        from workspaces.models import SemanticPolicy

        row = SemanticPolicy.objects.get(workspace=self.workspace)
        row.policy = {**row.policy, "indexing": {**row.policy["indexing"], "paused": paused}}
        row.save(update_fields=["policy"])

    def pipeline_overhead(self) -> None:
        """Chunk, hash and write a sample of documents twice: one transaction per document (each
        save's after-commit task) and in batches (reindex, a chunking change)."""
        from knowledge.embeddings import pipeline
        from knowledge.models import Document, EmbeddingChunk

        # Ordered by namespace and path, which the corpus fixes, so every run chunks the same sample.
        ids = list(Document.objects.order_by(*DOCUMENT_ORDER).values_list("id", flat=True))
        sample = self.rng.sample(ids, min(self.sizes["overhead_docs"], len(ids)))
        runs = {
            "per_document": lambda: sum(pipeline.chunks_sync(document_id, force=True) for document_id in sample),
            "batched": lambda: pipeline.chunks_sync_many(sample, force=True),
        }
        self.results["overhead"] = {"documents": len(sample), "batch": pipeline.SYNC_BATCH}
        for name, run in runs.items():
            started = time.perf_counter()
            chunks = run()
            seconds = time.perf_counter() - started
            self.results["overhead"][name] = {
                "chunks": chunks,
                "seconds": round(seconds, 2),
                "chunks_per_s": round(chunks / seconds, 1),
            }
        self.results["overhead"]["total_chunks"] = EmbeddingChunk.objects.count()

    def embed_all(self) -> None:
        from knowledge.embeddings import pipeline

        self._set_paused(False)
        totals = {"claimed": 0, "embedded": 0, "reused": 0, "provider_calls": 0, "failed": 0}
        started = time.perf_counter()
        while True:
            result = pipeline.embed_batch(self.workspace.pk)
            if result.error:
                raise SystemExit(f"embedding failed: {result.error}")
            if not result.claimed:
                break
            for name in totals:
                totals[name] += getattr(result, name)
        seconds = time.perf_counter() - started
        self.results["loopback_indexing"] = {
            **totals,
            "seconds": round(seconds, 2),
            "chunks_per_s": round(totals["claimed"] / seconds, 1),
        }

    def local_model(self) -> None:
        from knowledge.embeddings.providers import EmbeddingSpec, LocalProvider, ProviderError
        from knowledge.models import EmbeddingChunk

        texts = list(
            EmbeddingChunk.objects.order_by(*CHUNK_ORDER).values_list("text", flat=True)[: self.sizes["local_chunks"]]
        )
        provider = LocalProvider(EmbeddingSpec("local", "all-MiniLM-L6-v2", 384))
        try:
            started = time.perf_counter()
            LocalProvider.load()
            loaded = time.perf_counter() - started
        except ProviderError as exc:
            self.results["local_indexing"] = {"error": str(exc)}
            return
        started = time.perf_counter()
        provider.embed(texts)
        seconds = time.perf_counter() - started
        self.results["local_indexing"] = {
            "chunks": len(texts),
            "seconds": round(seconds, 2),
            "chunks_per_s": round(len(texts) / seconds, 1),
            "load_seconds": round(loaded, 2),
        }

    # --- queries -------------------------------------------------------------------------------

    def _query_texts(self, count: int) -> list[tuple[str, str]]:
        """(query text, source document id): a few consecutive words from chunks picked at random."""
        from knowledge.models import EmbeddingChunk

        # Seeded, so every run on the same corpus asks the same questions.
        ids = list(
            EmbeddingChunk.objects.filter(document__archived=False).order_by(*CHUNK_ORDER).values_list("id", flat=True)
        )
        rng = random.Random(SEED + count)
        picked = rng.sample(ids, min(len(ids), count * 3))
        found = {
            pk: row
            for pk, *row in EmbeddingChunk.objects.filter(id__in=picked).values_list("id", "text", "document_id")
        }
        rows = [found[pk] for pk in picked]
        queries = []
        for text, document_id in rows:
            words = re.findall(r"[A-Za-z]{3,}", text.split("\n\n", 1)[-1])
            if len(words) < 12:
                continue
            start = rng.randrange(0, len(words) - 8)
            queries.append((" ".join(words[start : start + rng.randint(4, 8)]), str(document_id)))
            if len(queries) == count:
                break
        return queries

    def _search(self, user: str, query: str, mode: str, limit: int = 10) -> dict[str, Any]:
        token = self.state["tokens"][user]
        response = self.client.get(
            "/kb/search",
            {"q": query, "mode": mode, "limit": limit, "content_mode": "none"},
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
        if response.status_code != 200:
            raise SystemExit(f"search failed ({response.status_code}): {response.content[:300]!r}")
        return response.json()

    def latency(self) -> None:
        queries = [q for q, _ in self._query_texts(self.sizes["latency_queries"])]
        for query in queries[:5]:  # warm the caches and the model-free path
            self._search("admin", query, "semantic")
        rows: dict[str, Any] = {}
        for mode in ("semantic", "hybrid"):
            for user in USERS:
                walls, embeds, searches = [], [], []
                for query in queries:
                    started = time.perf_counter()
                    body = self._search(user, query, mode)
                    wall = (time.perf_counter() - started) * 1000
                    embed = body["timings"]["embed_ms"]
                    walls.append(wall - embed)
                    embeds.append(embed)
                    searches.append(body["timings"]["search_ms"])
                rows[f"{mode}:{user}"] = {
                    "without_embedding_ms": summary(walls),
                    "vector_query_ms": summary(searches),
                    "embedding_ms": summary(embeds),
                }
        rows["raw_pgvector"] = {"without_embedding_ms": summary(self._raw_pgvector(queries))}
        self.results["latency"] = rows

    def _raw_pgvector(self, queries: list[str]) -> list[float]:
        """The ratio baseline: nearest 10 chunks of the space by HNSW, no access filter, no grouping."""
        from django.db import connection, transaction

        from knowledge.embeddings import pipeline, store
        from knowledge.embeddings.providers import provider_for, spec_from_policy

        row, policy = pipeline.workspace_policy(self.workspace.pk)
        space = pipeline.active_space(self.workspace.pk)
        provider = provider_for(spec_from_policy(policy, pipeline.workspace_key(row, policy)))
        cast, _ = store.vector_type(space.dimensions)
        timings = []
        for query in queries:
            vector = store.literal(provider.embed([query])[0])
            started = time.perf_counter()
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT chunk_id FROM {store.TABLE} WHERE space_id = %s "
                    f"ORDER BY embedding::{cast} <=> %s::{cast} LIMIT 10",
                    [space.pk, vector],
                )
                cursor.fetchall()
            timings.append((time.perf_counter() - started) * 1000)
        return timings

    def recall_against_exact(self) -> None:
        from knowledge import selectors
        from knowledge.embeddings import pipeline
        from knowledge.embeddings import search as semantic_search
        from knowledge.embeddings.providers import provider_for, spec_from_policy

        row, policy = pipeline.workspace_policy(self.workspace.pk)
        space = pipeline.active_space(self.workspace.pk)
        provider = provider_for(spec_from_policy(policy, pipeline.workspace_key(row, policy)))
        queries = [q for q, _ in self._query_texts(min(100, self.sizes["latency_queries"]))]
        rows = {}
        for user in USERS:
            documents = selectors.document_list(actor=self.actors[user], filters=selectors.DocumentFilters())
            scope_sql, scope_params = selectors.search_scope(documents)
            readable = documents.count()
            recalls, strict, short = [], [], 0
            for query in queries:
                hits = self._search(user, query, "semantic")["data"]
                served = [(hit["document"]["id"], hit["score"]) for hit in hits]
                vector = provider.embed([query])[0]
                exact_rows = semantic_search._chunk_rows(space, vector, scope_sql, scope_params, 2000, exact=True)
                best = semantic_search._group(exact_rows, 0.0)[:10]
                exact = {str(m.document_id) for m in best}
                if exact:
                    # As ANN benchmarks count it: a served document is a true neighbour when it is
                    # no farther than the exact 10th (ties at that distance are equally right).
                    tenth = best[-1].score - 1e-6
                    right = sum(1 for pk, score in served if pk in exact or score >= tenth)
                    recalls.append(min(right, len(exact)) / len(exact))
                    strict.append(len(exact & {pk for pk, _ in served}) / len(exact))
                if len(served) < min(10, len(exact)):
                    short += 1
            rows[user] = {
                "readable_documents": readable,
                "recall_at_10": round(statistics.mean(recalls), 4) if recalls else None,
                "same_documents_at_10": round(statistics.mean(strict), 4) if strict else None,
                "short_pages": short,
                "queries": len(queries),
            }
        self.results["recall_vs_exact"] = rows

    def hybrid_recall(self) -> None:
        labelled = self._query_texts(self.sizes["labelled"])
        found = {"text": 0, "semantic": 0, "hybrid": 0}
        for query, document_id in labelled:
            for mode in found:
                ids = [hit["document"]["id"] for hit in self._search("admin", query, mode)["data"]]
                found[mode] += document_id in ids
        recall = {mode: round(hits / len(labelled), 4) for mode, hits in found.items()}
        best_leg = max(recall["text"], recall["semantic"])
        self.results["hybrid_recall"] = {
            "queries": len(labelled),
            **recall,
            "gain_over_best_leg": round((recall["hybrid"] - best_leg) / best_leg, 4) if best_leg else None,
        }

    # --- freshness with a real worker ----------------------------------------------------------

    def freshness(self) -> None:
        """Edits timed in a child process whose Celery app is configured for the worker's broker
        from its start: repointing this process's app at another broker leaves its producer pool,
        and the tasks it registered, behind (every edit then waited out its 60 s)."""
        import tempfile

        from django.conf import settings
        from django.db import connection

        broker = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
        try:
            import redis

            redis.Redis.from_url(broker).flushdb()
        except Exception as exc:  # no Redis here: report instead of failing the whole run
            self.results["freshness"] = {"error": f"Redis unavailable: {type(exc).__name__}"}
            return
        db = connection.settings_dict
        env = {
            **os.environ,
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "REDIS_URL": broker,
            "DATABASE_URL": f"postgres://{db['USER']}@{quote(db['HOST'], safe='')}/{db['NAME']}",
            "SECRET_KEY": settings.SECRET_KEY,
        }
        with tempfile.TemporaryDirectory() as work:
            out = Path(work) / "freshness.json"
            command = [sys.executable, "-m", "bench.semantic_bench", "--state", str(self.state_path),
                       "--scale", self.scale, "--out", str(out), "--step", "timed_edits"]  # fmt: skip
            child = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=False)
            if child.returncode or not out.exists():
                self.results["freshness"] = {"error": f"the timed edits failed (exit {child.returncode})"}
                return
            self.results["freshness"] = json.loads(out.read_text())["freshness"]

    def timed_edits(self) -> None:
        """Seconds from each edit's save until semantic search finds its new text, with a real
        worker on this process's broker (run by `freshness` in a child process)."""
        from django.db.models import F

        from knowledge import selectors
        from knowledge import services as kb
        from knowledge.embeddings import search as semantic_search
        from knowledge.models import Document, EmbeddingChunk

        worker_log = open(ROOT / "var" / "bench" / "semantic-worker.log", "w")  # noqa: SIM115
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config.celery_app", "worker", "--pool=solo", "-l", "INFO",
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, stdout=worker_log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        actor = self.actors["admin"]

        def scope(namespace: str | None) -> tuple[str, list[Any]]:
            filters = selectors.DocumentFilters(namespace=namespace)
            return selectors.search_scope(selectors.document_list(actor=actor, filters=filters))

        def finds(document_id: Any, text: str, where: tuple[str, list[Any]]) -> bool:
            result = semantic_search.semantic_search(
                workspace_id=self.workspace.pk, text=text, scope_sql=where[0], scope_params=where[1], limit=10, offset=0
            )
            return str(document_id) in {str(m.document_id) for m in result.matches}

        candidates = list(
            Document.objects.filter(archived=False, current_version__byte_length__lt=20_000)
            .order_by(*DOCUMENT_ORDER)
            .values_list("id", flat=True)
        )
        delays, edits = [], []
        try:
            time.sleep(3)  # worker start-up is not part of an edit's latency
            for n, document_id in enumerate(self.rng.sample(candidates, self.sizes["fresh"])):
                nonce = " ".join(f"{word}{n}" for word in NONCE_WORDS)
                # A section long enough (~100 tokens) to be a chunk of its own: a short one is merged
                # into its neighbour, whose other words then decide whether the query finds it.
                section = "\n".join([nonce] * 10)
                document = Document.objects.select_related("current_version", "namespace").get(pk=document_id)
                content = document.current_version.content + f"\n\n## Fresh {n}\n\n{section}\n"
                # Searched within its namespace (an exact comparison): a query made only of words
                # no other chunk has is a needle an HNSW scan over the whole space may not reach,
                # which says nothing about how soon the edit was indexed (counted separately below).
                where = scope(document.namespace.slug)
                edits.append((document_id, nonce))
                kb.document_revise(actor=actor, document_id=document_id, content=content)
                saved = time.perf_counter()
                while time.perf_counter() - saved < 60:
                    if finds(document_id, nonce, where):
                        chunks = EmbeddingChunk.objects.filter(document_id=document_id)
                        stale = chunks.exclude(state="embedded") | chunks.exclude(
                            version_id=F("document__current_version_id")
                        )
                        if not stale.exists():
                            break
                    time.sleep(0.05)
                delays.append(time.perf_counter() - saved)
        finally:
            worker.terminate()
            worker.wait(20)
            worker_log.close()
        everywhere = scope(None)
        self.results["freshness"] = {
            "edits": len(delays),
            **summary(delays),
            "delays_s": [round(delay, 2) for delay in delays],
            "found_workspace_wide": sum(finds(document_id, nonce, everywhere) for document_id, nonce in edits),
        }

    def close(self) -> None:
        self.server.stop()


def report(result: dict[str, Any]) -> str:
    lines = [f"### Semantic search on PostgreSQL + pgvector ({result['scale']} corpus)", ""]
    o, li, lo = result["overhead"], result["loopback_indexing"], result.get("local_indexing", {})
    lines += [
        "| indexing | chunks | seconds | chunks/s | aim |",
        "| --- | ---: | ---: | ---: | --- |",
        *(
            f"| pipeline overhead (chunk, hash, write), {label}, {o['documents']} documents | {run['chunks']} "
            f"| {run['seconds']} | {run['chunks_per_s']} | {aim} |"
            for label, run, aim in (
                ("a transaction per document (each save)", o["per_document"], "reported"),
                (f"{o['batch']} documents a transaction (reindex)", o["batched"], f"≥ {AIMS['overhead_chunks_s']}"),
            )
        ),
        f"| claim + embed + complete, loopback provider | {li['claimed']} | {li['seconds']} | {li['chunks_per_s']} "
        f"| {li['provider_calls']} provider calls, {li['reused']} reused |",
    ]
    if "chunks" in lo:
        lines.append(
            f"| local MiniLM (int8 ONNX, provider only) | {lo['chunks']} | {lo['seconds']} | {lo['chunks_per_s']} "
            f"| model load {lo['load_seconds']} s |"
        )
    lines += ["", "| query (ms, query embedding excluded) | p50 | p95 | vector query p95 | embedding p50 | aim p95 |"]
    lines.append("| --- | ---: | ---: | ---: | ---: | --- |")
    for key, row in result["latency"].items():
        if key == "raw_pgvector":
            continue
        mode, user = key.split(":")
        aim = AIMS["semantic_p95_ms"] if mode == "semantic" else AIMS["hybrid_p95_ms"]
        wall = row["without_embedding_ms"]
        lines.append(
            f"| {mode}, {user} | {wall['p50']} | {wall['p95']} | {row['vector_query_ms']['p95']} "
            f"| {row['embedding_ms']['p50']} | ≤ {aim} |"
        )
    raw = result["latency"]["raw_pgvector"]["without_embedding_ms"]
    lines.append(f"| raw pgvector top 10 (no ACL, baseline) | {raw['p50']} | {raw['p95']} | – | – | – |")
    lines.append(
        "Hybrid starts its text leg (on a second connection) before the query is embedded: its figure is "
        "the time the request takes beyond the embedding."
    )
    lines += [
        "",
        "| semantic leg vs exact scan | readable documents | recall@10 | same documents | short pages | aim |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for user, row in result["recall_vs_exact"].items():
        lines.append(
            f"| {user} | {row['readable_documents']} | {row['recall_at_10']} | {row.get('same_documents_at_10')} "
            f"| {row['short_pages']} of {row['queries']} | recall ≥ {AIMS['recall']}, 0 short |"
        )
    lines.append(
        "recall@10 counts a served document as right when it is no farther than the exact 10th (ties at that "
        "distance are equally right); same documents is the plain overlap of the two top-10 sets."
    )
    h = result["hybrid_recall"]
    lines += [
        "",
        f"Hybrid recall@10 on {h['queries']} labelled corpus queries: text {h['text']}, semantic {h['semantic']}, "
        f"hybrid {h['hybrid']} (gain over the better leg {h['gain_over_best_leg']}; aim ≥ 0.05).",
    ]
    fresh = result.get("freshness", {})
    if "p95" in fresh:
        lines.append(
            f"Freshness with a real Celery worker: an edit is found by semantic search in its namespace "
            f"{fresh['p50']} s (p50) / {fresh['p95']} s (p95) after its commit over {fresh['edits']} edits "
            f"(aim p95 ≤ {AIMS['fresh_p95_s']} s); afterwards a workspace-wide search (HNSW) found "
            f"{fresh.get('found_workspace_wide')} of the {fresh['edits']} edits' own words."
        )
    elif fresh:
        lines.append(f"Freshness: not measured ({fresh.get('error')}).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", type=Path, required=True, help="the state file knowledge_bench build wrote")
    parser.add_argument("--scale", choices=sorted(SCALES), default="full")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--step", choices=["timed_edits"], help="run one step alone (the freshness child)")
    args = parser.parse_args(argv)
    setup_django()
    from django.db import connection

    if connection.vendor != "postgresql":
        print("semantic bench: PostgreSQL only (SQLite deployments search text only)", file=sys.stderr)
        return 0
    import logging

    logging.disable(logging.WARNING)
    bench = Bench(args.scale, args.state)
    steps = [
        bench.enable,
        bench.pipeline_overhead,
        bench.embed_all,
        bench.local_model,
        bench.latency,
        bench.recall_against_exact,
        bench.hybrid_recall,
        bench.freshness,
    ]
    if args.step:
        steps = [getattr(bench, args.step)]
    try:
        for step in steps:
            started = time.perf_counter()
            step()
            if step.__name__ == "embed_all":
                with connection.cursor() as cursor:
                    cursor.execute("VACUUM ANALYZE")
            print(f"  semantic: {step.__name__} {time.perf_counter() - started:.1f} s", file=sys.stderr)
    finally:
        bench.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(bench.results, indent=2))
    if not args.step:
        print(report(bench.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
