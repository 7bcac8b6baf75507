"""Embed a workspace's pending chunks through the project's own pipeline, in this process.

    DATABASE_URL=... DJANGO_SETTINGS_MODULE=config.settings.local CELERY_TASK_ALWAYS_EAGER=true \\
        .venv/bin/python bench/quality/index_embeddings.py --workspace quality --user evaluator

`evaluate.py --modes ...semantic` loads the corpus with the workspace's semantic policy enabled
but indexing paused, so each page is chunked after its write and nothing is embedded inside an
HTTP request. This script then unpauses indexing with `workspaces.semantic.policy_update`, as an
admin's PATCH would; its after-commit hook queues `embed_workspace_task`, which eager Celery runs
here, looping slice after slice (`pipeline.embed_slice`: claim, provider call, fenced completion)
until no chunk is claimable, as `make run` does.
It prints one JSON line: chunks by state, seconds, chunks/s and the last error, if any.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def _progress(workspace_id: int, done: threading.Event, every: float, started: float) -> None:
    from django.db import connection
    from knowledge.models import ChunkState, EmbeddingChunk

    try:
        while not done.wait(every):
            chunks = EmbeddingChunk.objects.filter(workspace_id=workspace_id)
            embedded = chunks.filter(state=ChunkState.EMBEDDED).count()
            total = chunks.count()
            seconds = time.perf_counter() - started
            print(
                f"  embedded {embedded}/{total} chunks in {seconds:.0f}s ({embedded / seconds:.1f}/s)",
                file=sys.stderr,
                flush=True,
            )
    finally:
        connection.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", required=True, help="workspace slug")
    parser.add_argument("--user", required=True, help="a workspace admin's username")
    parser.add_argument("--progress-seconds", type=float, default=60.0)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from knowledge.embeddings import pipeline
    from workspaces import semantic
    from workspaces.access import actor_for
    from workspaces.models import Workspace

    if not settings.CELERY_TASK_ALWAYS_EAGER:
        raise SystemExit("set CELERY_TASK_ALWAYS_EAGER=true: the embedding tasks run in this process")
    workspace = Workspace.objects.get(slug=args.workspace)
    actor = actor_for(get_user_model().objects.get(username=args.user), workspace)
    before = pipeline.indexing_status(workspace.pk)
    if not before["pgvector_ready"] or before["unavailable_reason"]:
        raise SystemExit(f"semantic search cannot run here: {before['unavailable_reason'] or before['reason']}")
    with connection.cursor() as cursor:  # the tsvector and chunk tables were just bulk-loaded
        cursor.execute("ANALYZE")
    done = threading.Event()
    started = time.perf_counter()
    watcher = threading.Thread(target=_progress, args=(workspace.pk, done, args.progress_seconds, started), daemon=True)
    watcher.start()
    try:
        with transaction.atomic():  # the hook runs on commit: the whole indexing happens here
            semantic.policy_update(actor=actor, patch={"indexing": {"paused": False}})
    finally:
        done.set()
        watcher.join()
    seconds = time.perf_counter() - started
    after = pipeline.indexing_status(workspace.pk)
    with connection.cursor() as cursor:  # as autovacuum would after a bulk load
        cursor.execute("VACUUM ANALYZE")
    embedded = after["chunks"]["embedded"] - before["chunks"]["embedded"]
    print(
        json.dumps(
            {
                "chunks": after["chunks"],
                "embedded_now": embedded,
                "queue_depth": after["queue_depth"],
                "seconds": round(seconds, 1),
                "chunks_per_s": round(embedded / seconds, 2) if seconds else None,
                "provider": after["provider"],
                "model": after["model"],
                "space_id": after["space_id"],
                "last_error": after["last_error"],
            }
        )
    )
    return 0 if after["queue_depth"] == 0 and not after["chunks"]["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
