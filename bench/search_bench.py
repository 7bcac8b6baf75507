"""Text-search benchmark: latency through the HTTP API next to the raw SQL of the same search.

Run against a deployment whose corpus was built by `make bench` (or any corpus):
    python bench/search_bench.py --url http://127.0.0.1:PORT --token admin=kb_... --token 2%=kb_...
with DATABASE_URL set to the same database, so the raw statements can be replayed directly.
Query terms are picked from the corpus itself by document frequency.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
ITERATIONS = 30


def pick_terms() -> dict[str, str]:
    """Terms by document frequency class: rare, mid, common and very common, plus composites."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT lexeme, COUNT(*) FROM knowledge_searchterm WHERE lexeme ~ '^[a-z]{4,}$' "
                "GROUP BY lexeme ORDER BY COUNT(*) DESC LIMIT 20000"
            )
        else:
            cursor.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kb_vocab USING fts5vocab(knowledge_search_fts, 'row')"
            )
            cursor.execute(
                "SELECT term, doc FROM temp.kb_vocab WHERE term GLOB '[a-z][a-z][a-z][a-z]*' "
                "ORDER BY doc DESC LIMIT 20000"
            )
        rows = cursor.fetchall()
        cursor.execute("SELECT COUNT(*) FROM knowledge_document")
        total = cursor.fetchone()[0]
    by_df = [(term, df / max(total, 1)) for term, df in rows]

    def nearest(fraction: float) -> str:
        return min(by_df, key=lambda item: abs(item[1] - fraction))[0]

    very_common, common, mid, rare = nearest(0.8), nearest(0.4), nearest(0.05), nearest(0.003)
    return {
        "rare": rare,
        "mid": mid,
        "common": common,
        "very common": very_common,
        "two words": f"{mid} {nearest(0.08)}",
        "phrase": f'"{very_common} {common}"',
        "prefix": mid[:4] + "*",
        "question": f"how does {mid} relate to {rare}?",
    }


def measure(url: str, token: str, query: str, clients: int, snippets: bool) -> dict[str, Any]:
    params = {"q": query, "limit": 20, "content_mode": "snippet" if snippets else "none"}
    latencies: list[float] = []
    lock = threading.Lock()
    total = 0

    def worker() -> None:
        nonlocal total
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            client.get("/kb/search", params=params)  # warm the connection
            for _ in range(ITERATIONS // clients + 2):
                started = time.perf_counter()
                response = client.get("/kb/search", params=params)
                elapsed = (time.perf_counter() - started) * 1000
                response.raise_for_status()
                with lock:
                    latencies.append(elapsed)
                    total = response.json()["total"]

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    latencies.sort()
    return {
        "n": len(latencies),
        "total": total,
        "p50": statistics.median(latencies),
        "p95": latencies[int(len(latencies) * 0.95) - 1],
        "rps": len(latencies) / wall,
    }


def raw_sql_ms(username: str, query: str) -> float:
    """The same search's SQL statements replayed directly on the database connection (median)."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from knowledge import selectors
    from knowledge.search import run_search
    from knowledge.search_query import parse_query
    from workspaces.access import actor_for
    from workspaces.models import Membership

    user = get_user_model().objects.get(username=username)
    actor = actor_for(user, Membership.objects.filter(user=user).first().workspace)
    documents = selectors.document_list(actor=actor, filters=selectors.DocumentFilters())
    scope_sql, scope_params = documents.order_by().values("id").query.sql_with_params()
    parsed = parse_query(query)
    with CaptureQueriesContext(connection) as captured:
        run_search(query=parsed, scope_sql=scope_sql, scope_params=list(scope_params), limit=20, offset=0)
    statements = [q["sql"] for q in captured.captured_queries]
    timings = []
    with connection.cursor() as cursor:
        for _ in range(7):
            started = time.perf_counter()
            for statement in statements:
                cursor.execute(statement)
                cursor.fetchall()
            timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


def main() -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", action="append", required=True, help="label=username=token")
    parser.add_argument("--backend", default="postgresql")
    parser.add_argument("--output", default=str(ROOT / "var" / "bench"))
    args = parser.parse_args()
    terms = pick_terms()
    rows = []
    for spec in args.token:
        label, username, token = spec.split("=", 2)
        for name, query in terms.items():
            raw = raw_sql_ms(username, query)
            plain = measure(args.url, token, query, 1, snippets=False)
            for clients in (1, 4):
                result = measure(args.url, token, query, clients, snippets=True)
                row = {"user": label, "query": name, "q": query, "clients": clients, "raw_sql_ms": raw, **result}
                if clients == 1:
                    row["p95_without_snippets"] = plain["p95"]
                rows.append(row)
    print(f"\n### Text search ({args.backend}), 20 results with snippets\n")
    print("| user | query | matches | clients | p50 ms | p95 ms | req/s | p95 no snippets | raw SQL ms | API/SQL |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        ratio = row["p50"] / row["raw_sql_ms"] if row["raw_sql_ms"] else 0
        no_snip = f"{row['p95_without_snippets']:.1f}" if "p95_without_snippets" in row else ""
        print(
            f"| {row['user']} | {row['query']} | {row['total']} | {row['clients']} | {row['p50']:.1f} | "
            f"{row['p95']:.1f} | {row['rps']:.0f} | {no_snip} | {row['raw_sql_ms']:.1f} | {ratio:.1f}x |"
        )
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"search-{args.backend}.json").write_text(json.dumps({"terms": terms, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
