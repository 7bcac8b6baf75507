"""`agor kb import`: plan locally and against destination receipts, then create what is missing.

Planning never writes. With --apply the destination namespace is created (private, owned by the
importer), documents go in bounded batches whose every item commits with its receipt, and
references are reconciled only once every planned document exists. A lost acknowledgement,
a SIGKILL or a Ctrl-C is repaired by `--resume --apply`, which reads receipts instead of
creating documents again.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transfer import faults
from transfer import format as fmt
from transfer.client import ApiError, KnowledgeClient
from transfer.errors import Failures, TransferError, document_failure, from_api, item_failure, unreliable
from transfer.localfs import Repo, refuse_windows
from transfer.progress import Progress
from transfer.repository import ImportPlan, PlanItem, batches, build_plan, read_repository, request_item, rewritten_body

RECEIPT_PAGE = 500
RECONCILE_BATCH = 100
CANCELLED = "Cancelled; completed work is retained. Re-run with --resume."


@dataclass
class ImportOptions:
    directory: Path
    slug: str
    apply: bool = False
    resume: bool = False


def batch_size(default: int) -> int:
    """Documents per request (1-100); AGOR_TRANSFER_BATCH tunes it, e.g. for slow links or tests."""
    try:
        value = int(os.environ.get("AGOR_TRANSFER_BATCH") or default)
    except ValueError:
        value = default
    return max(1, min(100, value))


def cancelled_error(stage: str) -> TransferError:
    return TransferError(CANCELLED, stage=stage, exit_code=130)


def _get(client: KnowledgeClient, route: str, stage: str, **params: Any) -> Any:
    try:
        return client.get(route, route=route, **params)
    except ApiError as exc:
        raise from_api(exc, stage=stage) from None


INVENTORY_READS = 5  # a killed run's last requests may still be committing when a resume starts


class _InventoryMoved(Exception):
    """The receipts changed between pages: read them again."""


def destination_receipts(
    client: KnowledgeClient, plan: ImportPlan, progress: Progress, *, pause: float = 1.0
) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    """(namespace or None, receipts by key); re-read while they settle, then an inconsistent inventory stops the run."""
    for attempt in range(1, INVENTORY_READS + 1):
        try:
            return _read_receipts(client, plan, progress)
        except _InventoryMoved as exc:
            if attempt == INVENTORY_READS:
                raise unreliable("destination", str(exc)) from None
            progress.line(
                "The destination changed while it was read (an earlier run may still be finishing); reading it again."
            )
            time.sleep(pause * attempt)
    raise AssertionError("unreachable")


def _read_receipts(
    client: KnowledgeClient, plan: ImportPlan, progress: Progress
) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    progress.start("Planning: destination inventory")
    receipts: dict[str, dict[str, Any]] = {}
    namespace = None
    cursor = None
    total = None
    keys = {item.key for item in plan.items}
    while True:
        params = {"namespace": plan.target_slug, "bundle": plan.bundle, "limit": RECEIPT_PAGE, "cursor": cursor}
        page = _get(client, "/kb/transfers/receipts", "planning", **params)
        namespace = page.get("namespace")
        if total is None:
            total = page.get("total", 0)
        rows = page.get("receipts") or []
        if page.get("total") != total or (cursor is not None and not rows):
            progress.finish()
            raise _InventoryMoved("it changed while paging")
        for row in rows:
            if row.get("key") in receipts or row.get("key") not in keys:
                raise unreliable("destination", "unknown or repeated keys")
            receipts[row["key"]] = row
        progress.discovered(len(receipts))
        cursor = page.get("next_cursor")
        if not cursor:
            break
    progress.finish()
    if len(receipts) != total:
        raise _InventoryMoved("count mismatch")
    return namespace, receipts


def run_import(
    client: KnowledgeClient,
    options: ImportOptions,
    progress: Progress,
    cancel: threading.Event,
    summary: dict[str, Any],
) -> int:
    """Plan, and with `apply` import; fills `summary` as it goes (it is printed even after a failure)."""
    refuse_windows()
    if not fmt.SLUG.match(options.slug):
        raise TransferError("--namespace takes a new destination slug (a-z, 0-9, . _ -), not an id.", stage="planning")
    with Repo(options.directory) as repo:
        snapshot = read_repository(repo, progress)
        plan = build_plan(repo, snapshot, options.slug, progress)
        summary.update(
            dryRun=not options.apply,
            namespace=options.slug,
            bundle=plan.bundle,
            documents=len(plan.items),
            bytes=plan.total_bytes,
            unresolved=plan.unresolved,
            unlisted=len(snapshot.unlisted),
        )
        _get(client, "/kb/me", "planning")
        namespace, receipts = destination_receipts(client, plan, progress)
        if namespace is not None and not options.resume:
            raise TransferError(
                "planning: this import already exists at the destination; re-run with --resume.", stage="planning"
            )
        unchanged = [item for item in plan.items if receipts.get(item.key, {}).get("unchanged")]
        conflicts = [item for item in plan.items if item.key in receipts and not receipts[item.key].get("unchanged")]
        creates = [item for item in plan.items if item.key not in receipts]
        progress.line(
            f"Plan: {len(plan.items)} documents; {len(unchanged)} unchanged; {len(creates)} create; "
            f"{len(conflicts)} conflicts; {sum(i.bytes for i in creates)} bytes; {plan.unresolved} unresolved KB links"
        )
        summary.update(unchanged=len(unchanged), create=len(creates), conflicts=len(conflicts))
        if not options.apply:
            return 0
        faults.point("import:planned")
        failures = Failures()
        for item in conflicts:
            failures.add(
                item_failure(
                    stage="importing", key=item.key, source_id=item.header.id, code="imported_document_changed"
                )
            )
        _create_namespace(client, plan, resume=options.resume or namespace is not None)
        faults.point("import:namespace")
        summary.update(dryRun=False, created=0, failed=0)
        acknowledged = {item.key for item in unchanged}
        progress.start("Importing", total=len(creates), total_bytes=sum(item.bytes for item in creates))
        summary["created"] = _send_batches(
            client, repo, snapshot, plan, creates, failures, acknowledged, progress, cancel
        )
        # Created by an earlier run's request that was still in flight when this run planned.
        summary["skipped"] = len(acknowledged) - len(unchanged) - summary["created"]
        progress.finish()
        summary["failed"] = len(failures)
        if failures or len(acknowledged) != len(plan.items):
            summary["references"] = 0
            summary["reconciliation"] = "deferred until every planned document exists"
            summary["errors"] = failures.details()
            progress.line(f"Import incomplete: {len(failures)} failed or unconfirmed; re-run with --resume --apply.")
            for line in failures.details():
                progress.line("  " + line)
            return 1
        pending = [item for item in plan.items if not receipts.get(item.key, {}).get("reconciled")]
        summary["references"] = _reconcile(client, plan, pending, failures, progress, cancel)
        summary["failed"] = len(failures)
        if failures:
            summary["errors"] = failures.details()
            progress.line(f"Reference reconciliation incomplete: {len(failures)} failed; re-run with --resume --apply.")
            for line in failures.details():
                progress.line("  " + line)
            return 1
        progress.line(
            f"Imported: {summary['created']} created; {len(unchanged)} unchanged; "
            f"{summary['references']} references checked."
        )
        return 0


def _create_namespace(client: KnowledgeClient, plan: ImportPlan, *, resume: bool) -> None:
    ns = plan.namespace
    body = {
        "bundle": plan.bundle,
        "slug": plan.target_slug,
        "display_name": ns.display_name,
        "description": ns.description or "",
        "provenance": ns.provenance,
        "documents": len(plan.items),
        "request_bytes": plan.request_bytes,
        "resume": resume,
    }
    try:
        client.post("/kb/transfers/namespace", body, route="/kb/transfers/namespace")
    except ApiError as exc:
        raise from_api(exc, stage="namespace") from None


def parallel_requests() -> int:
    """Import requests in flight at once (1-4, default 4): documents of parallel requests are created
    side by side on the deployment's workers (only the limit accounting is serialized)."""
    try:
        value = int(os.environ.get("AGOR_TRANSFER_PARALLEL") or 4)
    except ValueError:
        value = 4
    return max(1, min(4, value))


def _payload(repo: Repo, snapshot: Any, plan: ImportPlan, batch: list[PlanItem]) -> dict[str, Any]:
    """The request for one batch, re-read from disk and refused if a file changed after planning."""
    documents = {doc.file: doc for doc in snapshot.documents}
    items = []
    for item in batch:
        body, _ = rewritten_body(repo, snapshot, documents[item.file], plan.target_slug)
        if fmt.sha256_hex(body) != item.sha256:
            raise fmt.FormatError("Local file changed after planning.", code="changed_after_planning", file=item.file)
        items.append(request_item(item, body))
    return {"bundle": plan.bundle, "namespace": plan.target_slug, "documents": items}


def _send_batches(
    client: KnowledgeClient,
    repo: Repo,
    snapshot: Any,
    plan: ImportPlan,
    creates: list[PlanItem],
    failures: Failures,
    acknowledged: set[str],
    progress: Progress,
    cancel: threading.Event,
) -> int:
    """Send batches with a few requests in flight; a fatal answer stops new ones, in-flight ones finish."""
    created = 0
    fatal: BaseException | None = None
    in_flight: deque[tuple[list[PlanItem], Future[Any]]] = deque()

    def post(request: dict[str, Any]) -> Any:
        return client.post("/kb/transfers/documents", request, route="/kb/transfers/documents")

    def settle() -> None:
        nonlocal created, fatal
        batch, future = in_flight.popleft()
        try:
            created += _record(batch, future.result(), failures, acknowledged)
        except ApiError as exc:
            error = from_api(exc, stage="importing")
            if error.fatal:
                fatal = fatal or error
            else:
                for item in batch:
                    failures.add(document_failure(error, key=item.key, source_id=item.header.id))
        except TransferError as exc:
            fatal = fatal or exc
        progress.advance(len(batch), sum(item.bytes for item in batch))
        faults.point("import:batch")

    with ThreadPoolExecutor(max_workers=parallel_requests(), thread_name_prefix="agor-import") as pool:
        try:
            for batch in batches(plan, creates, max_items=batch_size(50)):
                if cancel.is_set() or fatal is not None:
                    break
                in_flight.append((batch, pool.submit(post, _payload(repo, snapshot, plan, batch))))
                while len(in_flight) >= parallel_requests():
                    settle()
        finally:
            while in_flight:
                settle()
    progress.finish()
    if fatal is not None:
        raise fatal
    if cancel.is_set() and len(acknowledged) < len(plan.items):
        raise cancelled_error("importing")
    return created


def _record(batch: list[PlanItem], answer: Any, failures: Failures, acknowledged: set[str]) -> int:
    by_key = {item.key: item for item in batch}
    created = 0
    results = answer.get("results") or []
    if sorted(r.get("key") for r in results) != sorted(by_key):
        raise TransferError("importing: the deployment answered for other documents than were sent.", stage="importing")
    for result in results:
        item = by_key[result["key"]]
        if result.get("status") in ("created", "skipped"):
            acknowledged.add(item.key)
            created += result["status"] == "created"
        else:
            failures.add(
                item_failure(
                    stage="importing",
                    key=item.key,
                    source_id=item.header.id,
                    code=str(result.get("code") or "error"),
                    http_status=result.get("http_status"),
                )
            )
    return created


def _reconcile(
    client: KnowledgeClient,
    plan: ImportPlan,
    items: list[PlanItem],
    failures: Failures,
    progress: Progress,
    cancel: threading.Event,
) -> int:
    progress.start("Reconciling references", total=len(items))
    checked = 0
    for start in range(0, len(items), RECONCILE_BATCH):
        if cancel.is_set():
            raise cancelled_error("reconciling")
        chunk = items[start : start + RECONCILE_BATCH]
        body = {"bundle": plan.bundle, "namespace": plan.target_slug, "keys": [item.key for item in chunk]}
        try:
            answer = client.post("/kb/transfers/reconcile", body, route="/kb/transfers/reconcile")
        except ApiError as exc:
            error = from_api(exc, stage="reconciling")
            if error.fatal:
                raise error from None
            for item in chunk:
                failures.add(document_failure(error, key=item.key, source_id=item.header.id))
            progress.advance(len(chunk))
            continue
        by_key = {item.key: item for item in chunk}
        for result in answer.get("results") or []:
            item = by_key.get(result.get("key"))
            if item is None:
                continue
            if result.get("status") == "reconciled":
                checked += int(result.get("references") or 0)
            else:
                failures.add(
                    item_failure(
                        stage="reconciling",
                        key=item.key,
                        source_id=item.header.id,
                        code=str(result.get("code") or "error"),
                        http_status=result.get("http_status"),
                    )
                )
        progress.advance(len(chunk))
        faults.point("import:reconcile")
    progress.finish()
    return checked
