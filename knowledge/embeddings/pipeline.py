"""The embedding pipeline: chunks per current version, PostgreSQL claims, fenced completion.

A worker claims pending chunks with `FOR UPDATE SKIP LOCKED`, stamping an opaque token, a new
generation and a lease measured in database time. It then calls the provider once (outside any
transaction) and completes in one transaction that re-checks token, generation, lease, space and
that the chunk's version is still the document's current one. A stale worker commits nothing;
work it held returns to the queue when its lease expires. Chunks whose text already has a vector
in the space get it copied, without a provider call.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import DateTimeField, Exists, ExpressionWrapper, F, OuterRef, Q
from django.db.models.functions import Now
from django.utils import timezone

from knowledge.chunking import Chunk, ChunkingPolicy, chunk_markdown
from knowledge.embeddings import store
from knowledge.models import ChunkState, ChunkSyncFailure, Document, EmbeddingChunk, EmbeddingSpace
from workspaces import semantic
from workspaces.models import SemanticPolicy
from workspaces.secrets import SecretError

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
MAX_BACKOFF_SECONDS = 300.0
MULTI_WORKSPACE_BATCH = 8
MULTI_WORKSPACE_CANDIDATES = 32  # workspaces looked at per poll when they share workers
SINGLE_WORKSPACE_SCAN = 128
SLICE_SECONDS = 20.0  # one message's share of a worker before it hands the rest to a new message
STALE_SWEEP = 32  # documents re-chunked per sweep
SYNC_BATCH = 32  # documents chunked in one transaction by chunks_sync_many
SYNC_MAX_BACKOFF_SECONDS = 120.0
TABLE = EmbeddingChunk._meta.db_table


@dataclass(frozen=True)
class ClaimedChunk:
    id: str
    generation: int
    text: str
    content_hash: str


@dataclass
class Claim:
    token: str
    workspace_id: int
    space: EmbeddingSpace
    items: list[ClaimedChunk] = field(default_factory=list)


@dataclass
class BatchResult:
    claimed: int = 0
    embedded: int = 0
    reused: int = 0
    failed: int = 0
    stale: int = 0
    provider_calls: int = 0
    error: str | None = None
    retryable: bool = False  # the error was transient: the failed chunks back off and come back

    def add(self, other: BatchResult) -> None:
        for name in ("claimed", "embedded", "reused", "failed", "stale", "provider_calls"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if other.error:
            self.error, self.retryable = other.error, other.retryable

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def multi_workspace() -> bool:
    return settings.KNOWLEDGE_WORKSPACE_MODE == "required_from_auth"


def lease_seconds() -> int:
    return int(settings.KNOWLEDGE_EMBEDDING_LEASE_SECONDS)


def failed_retry_seconds() -> float:
    """Cool-down before the sweep tries a failed chunk or chunk sync again."""
    return float(settings.KNOWLEDGE_EMBEDDING_FAILED_RETRY_SECONDS)


def slice_batches() -> int | None:
    """Batches one message runs before handing over (None: only the time budget bounds a slice).

    Shared workers take one batch per message, so other workspaces' messages interleave.
    """
    if multi_workspace():
        return 1
    return int(settings.KNOWLEDGE_EMBEDDING_SLICE_BATCHES) or None


LoadedPolicy = tuple[SemanticPolicy, dict[str, Any]]  # the stored row and its effective settings


def workspace_policy(workspace_id: int) -> LoadedPolicy:
    row, _ = SemanticPolicy.objects.get_or_create(workspace_id=workspace_id)
    return row, semantic.merge(row.policy, {})


def workspace_key(row: SemanticPolicy, policy: dict[str, Any]) -> str | None:
    """The provider key the policy needs (None for the local model); SecretError when none is stored."""
    return None if policy["provider"] == "local" else semantic.provider_key(row)


def vectors_possible(policy: dict[str, Any]) -> bool:
    return connection.vendor == "postgresql" and bool(policy["enabled"]) and store.is_ready()


def space_for(workspace_id: int, policy: dict[str, Any]) -> EmbeddingSpace:
    """The space the policy selects, created (with its HNSW index) on first use."""
    space, _ = EmbeddingSpace.objects.get_or_create(
        workspace_id=workspace_id,
        provider=policy["provider"],
        model=policy["model"],
        dimensions=policy["dimensions"],
        base_url=policy.get("base_url") or "",
    )
    if store.is_ready():
        store.ensure_space_index(space.pk, space.dimensions)
    return space


def active_space(workspace_id: int) -> EmbeddingSpace | None:
    _, policy = workspace_policy(workspace_id)
    return space_for(workspace_id, policy) if vectors_possible(policy) else None


# --- chunks ---------------------------------------------------------------------------------


def chunks_sync(document_id: Any, *, force: bool = False) -> int:
    """Replace a document's chunks with those of its current version; returns chunks written.

    Unchanged text keeps its vector (copied by content hash before the old rows go), so a
    whitespace-only edit costs no provider call. Idempotent: a current set is left alone.
    """
    return _sync_batch([document_id], force=force)


def chunks_sync_many(document_ids: Iterable[Any], *, force: bool = False) -> int:
    """`chunks_sync` for many documents (reindex, a chunking change), SYNC_BATCH to a transaction."""
    ids = list(document_ids)
    return sum(_sync_batch(ids[start : start + SYNC_BATCH], force=force) for start in range(0, len(ids), SYNC_BATCH))


@dataclass(frozen=True)
class _NewChunk:
    document: Document
    space: EmbeddingSpace | None
    piece: Chunk


def _sync_batch(document_ids: list[Any], *, force: bool) -> int:
    with transaction.atomic():
        documents = list(
            Document.objects.select_for_update(of=("self",))
            .select_related("current_version", "namespace")
            .filter(pk__in=document_ids, current_version__isnull=False)
            .order_by("pk")  # one lock order for every batch
        )
        if not documents:
            return 0
        ChunkSyncFailure.objects.filter(document__in=documents).delete()  # kept if this sync fails (rollback)
        old: dict[Any, list[tuple[Any, Any]]] = defaultdict(list)
        for document_id, chunk_id, version_id in EmbeddingChunk.objects.filter(document__in=documents).values_list(
            "document_id", "id", "version_id"
        ):
            old[document_id].append((chunk_id, version_id))
        if not force:
            documents = [d for d in documents if not _chunks_current(old[d.pk], d.current_version_id)]
        spaces: dict[int, tuple[dict[str, Any], EmbeddingSpace | None]] = {}
        new: list[_NewChunk] = []
        for document in documents:
            workspace_id = document.namespace.workspace_id
            if workspace_id not in spaces:
                _, policy = workspace_policy(workspace_id)
                spaces[workspace_id] = (policy, space_for(workspace_id, policy) if vectors_possible(policy) else None)
            policy, space = spaces[workspace_id]
            chunking = ChunkingPolicy(**policy["chunking"])
            pieces = chunk_markdown(document.current_version.content, chunking, document_path=document.path)
            new.extend(_NewChunk(document, space, piece) for piece in pieces)
        chunk_ids = _insert_chunks(new)
        old_ids = [str(chunk_id) for document in documents for chunk_id, _ in old[document.pk]]
        if store.is_ready():
            for workspace_id, (_, space) in spaces.items():
                pairs = [
                    (chunk_id, row.piece.content_hash)
                    for chunk_id, row in zip(chunk_ids, new, strict=True)
                    if row.document.namespace.workspace_id == workspace_id
                ]
                copied = store.copy_by_hash(workspace_id, pairs)
                if space is not None:
                    _mark_embedded([chunk_id for chunk_id, space_id in copied if space_id == space.pk])
            store.delete_for_chunks(old_ids)
        EmbeddingChunk.objects.filter(id__in=old_ids).delete()
    return len(chunk_ids)


def _chunks_current(old: list[tuple[Any, Any]], version_id: Any) -> bool:
    return bool(old) and all(chunk_version == version_id for _, chunk_version in old)


def _insert_chunks(rows: list[_NewChunk]) -> list[str]:
    """Insert chunks as pending rows; returns their ids in order.

    One `unnest` statement on PostgreSQL: model instances and bulk_create cost more than the
    database work for a document of a few chunks.
    """
    ids = [uuid.uuid4() for _ in rows]
    if connection.vendor != "postgresql":
        EmbeddingChunk.objects.bulk_create(
            EmbeddingChunk(
                id=chunk_id,
                workspace_id=row.document.namespace.workspace_id,
                document=row.document,
                version_id=row.document.current_version_id,
                ordinal=row.piece.ordinal,
                heading_path=row.piece.heading_path,
                anchor=row.piece.anchor[:300],
                start_line=row.piece.start_line,
                end_line=row.piece.start_line + row.piece.text.count("\n"),
                text=row.piece.text,
                content_hash=row.piece.content_hash,
                tokens=row.piece.tokens,
                space=row.space,
            )
            for chunk_id, row in zip(ids, rows, strict=True)
        )
        return [str(chunk_id) for chunk_id in ids]
    columns = {
        "id": ("uuid", ids),
        "workspace_id": ("bigint", [row.document.namespace.workspace_id for row in rows]),
        "document_id": ("uuid", [row.document.pk for row in rows]),
        "version_id": ("uuid", [row.document.current_version_id for row in rows]),
        "space_id": ("bigint", [row.space.pk if row.space is not None else None for row in rows]),
        "ordinal": ("int", [row.piece.ordinal for row in rows]),
        "heading_path": ("jsonb", [json.dumps(row.piece.heading_path) for row in rows]),
        "anchor": ("text", [row.piece.anchor[:300] for row in rows]),
        "start_line": ("int", [row.piece.start_line for row in rows]),
        "end_line": ("int", [row.piece.start_line + row.piece.text.count("\n") for row in rows]),
        "text": ("text", [row.piece.text for row in rows]),
        "content_hash": ("text", [row.piece.content_hash for row in rows]),
        "tokens": ("int", [row.piece.tokens for row in rows]),
    }
    names = ", ".join(columns)
    arrays = ", ".join(f"%s::{kind}[]" for kind, _ in columns.values())
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {TABLE} ({names}, state, claim_token, generation, attempts, last_error)
            SELECT *, %s, '', 0, 0, '' FROM unnest({arrays})
            """,
            [ChunkState.PENDING, *(values for _, values in columns.values())],
        )
    return [str(chunk_id) for chunk_id in ids]


def _mark_embedded(chunk_ids: list[str]) -> int:
    """New chunks whose text already had a vector in the active space need no provider call."""
    if not chunk_ids:
        return 0
    return EmbeddingChunk.objects.filter(id__in=chunk_ids).update(
        state=ChunkState.EMBEDDED, embedded_at=timezone.now(), claim_token="", lease_until=None, last_error=""
    )


# --- claims ---------------------------------------------------------------------------------

CLAIMABLE = """
    c.workspace_id = %s AND c.space_id = %s
    AND (c.state = 'pending' OR (c.state = 'claimed' AND c.lease_until < now()))
    AND (c.available_at IS NULL OR c.available_at <= now())
    AND EXISTS (
        SELECT 1 FROM knowledge_document d JOIN workspaces_namespace n ON n.id = d.namespace_id
        WHERE d.id = c.document_id AND d.current_version_id = c.version_id AND NOT d.archived AND NOT n.archived
    )
"""


def claim(workspace_id: int, space: EmbeddingSpace, *, limit: int) -> Claim | None:
    """Claim up to `limit` chunks of one workspace's active space (PostgreSQL only)."""
    token = secrets.token_hex(16)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH picked AS (
                SELECT c.id FROM {TABLE} c WHERE {CLAIMABLE}
                ORDER BY c.state DESC, c.document_id, c.ordinal
                LIMIT %s FOR UPDATE OF c SKIP LOCKED
            )
            UPDATE {TABLE} c SET state = 'claimed', claim_token = %s, generation = c.generation + 1,
                lease_until = now() + make_interval(secs => %s), attempts = c.attempts + 1
            FROM picked WHERE c.id = picked.id
            RETURNING c.id, c.generation, c.text, c.content_hash
            """,
            [workspace_id, space.pk, limit, token, lease_seconds()],
        )
        rows = cursor.fetchall()
    if not rows:
        return None
    items = [ClaimedChunk(str(r[0]), int(r[1]), r[2], r[3]) for r in rows]
    return Claim(token=token, workspace_id=workspace_id, space=space, items=items)


def _fenced_update(claim: Claim, items: list[ClaimedChunk], assignments: str, params: list[Any]) -> list[str]:
    """Apply `assignments` to the claim's chunks that are still ours; returns their ids."""
    if not items:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {TABLE} c SET {assignments}
            FROM unnest(%s::uuid[], %s::int[]) AS g(id, generation)
            WHERE c.id = g.id AND c.generation = g.generation AND c.claim_token = %s
              AND c.state = 'claimed' AND c.lease_until > now() AND c.space_id = %s
              AND EXISTS (
                  SELECT 1 FROM knowledge_document d WHERE d.id = c.document_id
                  AND d.current_version_id = c.version_id AND NOT d.archived
              )
            RETURNING c.id
            """,
            [*params, [i.id for i in items], [i.generation for i in items], claim.token, claim.space.pk],
        )
        return [str(row[0]) for row in cursor.fetchall()]


def complete(claim: Claim, vectors: dict[str, list[float]]) -> int:
    """Store vectors for the chunks still held by this claim; returns how many committed."""
    claimed = {item.id: item for item in claim.items}
    unknown = set(vectors) - set(claimed)
    if unknown:
        raise ValueError("The result names chunks this claim does not hold.")
    for vector in vectors.values():
        if len(vector) != claim.space.dimensions or not all(math.isfinite(x) for x in vector):
            raise ValueError("A vector does not match the space's dimensions.")
    items = [claimed[chunk_id] for chunk_id in vectors]
    with transaction.atomic():
        committed = _fenced_update(
            claim,
            items,
            "state = 'embedded', claim_token = '', lease_until = NULL, embedded_at = now(), last_error = '', "
            "available_at = NULL",
            [],
        )
        store.write_vectors(claim.space.pk, [(cid, claimed[cid].content_hash, vectors[cid]) for cid in committed])
    return len(committed)


def release(claim: Claim, items: list[ClaimedChunk], *, error: str, retryable: bool, retry_after: float | None) -> int:
    """A failed provider call: retry later (with backoff) or mark failed after too many attempts.

    A failed chunk's `available_at` is when the sweep (`requeue_failed`) may try it again.
    """
    message = error[:300]
    if retryable:
        # Honour Retry-After; otherwise exponential backoff with full jitter, capped.
        assignments = (
            "state = CASE WHEN c.attempts >= %s THEN 'failed' ELSE 'pending' END, claim_token = '', "
            "lease_until = NULL, last_error = %s, available_at = now() + make_interval(secs => "
            "CASE WHEN c.attempts >= %s THEN %s::float "
            "ELSE COALESCE(%s::float, random() * least(%s::float, 2.0 * power(2, c.attempts))) END)"
        )
        params: list[Any] = [
            MAX_ATTEMPTS,
            message,
            MAX_ATTEMPTS,
            failed_retry_seconds(),
            None if retry_after is None else min(retry_after, 3600.0),
            MAX_BACKOFF_SECONDS,
        ]
    else:
        assignments = (
            "state = 'failed', claim_token = '', lease_until = NULL, last_error = %s, "
            "available_at = now() + make_interval(secs => %s::float)"
        )
        params = [message, failed_retry_seconds()]
    with transaction.atomic():
        return len(_fenced_update(claim, items, assignments, params))


def _reuse_existing(claim: Claim) -> tuple[list[ClaimedChunk], int]:
    """Chunks whose text already has a vector in the space take it; the rest need the provider."""
    hashes = list({item.content_hash for item in claim.items})
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT ON (v.content_hash) v.content_hash, v.embedding::text FROM {store.TABLE} v "
            "JOIN knowledge_embeddingchunk c ON c.id = v.chunk_id "
            "JOIN knowledge_document d ON d.id = c.document_id AND NOT d.archived "
            "WHERE v.space_id = %s AND v.content_hash = ANY(%s)",
            [claim.space.pk, hashes],
        )
        known = {h: [float(x) for x in text.strip("[]").split(",")] for h, text in cursor.fetchall()}
    reusable = {item.id: known[item.content_hash] for item in claim.items if item.content_hash in known}
    reused = complete(claim, reusable) if reusable else 0
    return [item for item in claim.items if item.id not in reusable], reused


def embed_batch(workspace_id: int) -> BatchResult:
    """One claim, at most one provider call, one fenced completion."""
    from knowledge.embeddings.providers import ProviderError, provider_for, spec_from_policy

    result = BatchResult()
    row, policy = workspace_policy(workspace_id)
    if not vectors_possible(policy) or policy["indexing"]["paused"]:
        return result
    try:
        key = workspace_key(row, policy)
    except SecretError:
        return result  # nothing to do until a key is configured; status says so
    space = space_for(workspace_id, policy)
    limit = int(policy["indexing"]["batch_size"])
    if multi_workspace():
        limit = min(limit, MULTI_WORKSPACE_BATCH)
    held = claim(workspace_id, space, limit=limit)
    if held is None:
        return result
    result.claimed = len(held.items)
    todo, result.reused = _reuse_existing(held)
    if not todo:
        return result
    try:
        provider = provider_for(spec_from_policy(policy, key, max_attempts=1))  # one call per claim
        result.provider_calls = 1
        vectors = provider.embed([item.text for item in todo])
    except ProviderError as exc:
        result.error, result.retryable = f"{exc.code}: {exc}", exc.retryable
        result.failed = release(
            held, todo, error=result.error, retryable=exc.retryable, retry_after=getattr(exc, "retry_after", None)
        )
        logger.warning("embedding batch of workspace %s failed: %s", workspace_id, exc.code)
        return result
    try:
        result.embedded = complete(held, {item.id: vector for item, vector in zip(todo, vectors, strict=True)})
    except ValueError as exc:
        result.error = f"bad_response: {exc}"
        result.failed = release(held, todo, error=result.error, retryable=False, retry_after=None)
        return result
    result.stale = len(todo) - result.embedded
    return result


def embed_slice(workspace_id: int, *, max_batches: int | None = None) -> tuple[BatchResult, bool]:
    """One message's share of a workspace: batches until done, an error, or the slice is used up.

    Returns the totals and whether claimable work is left for the next slice (a hand-over).
    """
    if max_batches is None:
        max_batches = slice_batches()
    totals = BatchResult()
    started = time.monotonic()
    batches = 0
    while True:
        result = embed_batch(workspace_id)
        totals.add(result)
        batches += 1
        if result.claimed == 0 or result.error:
            return totals, False
        if (max_batches and batches >= max_batches) or time.monotonic() - started >= SLICE_SECONDS:
            return totals, has_claimable(workspace_id)


def _claim_space(workspace_id: int) -> EmbeddingSpace | None:
    """The space whose chunks workers claim now: none off PostgreSQL or without an active space."""
    return active_space(workspace_id) if connection.vendor == "postgresql" else None


def seconds_until_retry(workspace_id: int) -> float | None:
    """When the workspace's earliest backed-off chunk may be claimed again (None: none waits)."""
    space = _claim_space(workspace_id)
    if space is None:
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT extract(epoch FROM min(c.available_at) - now()) FROM {TABLE} c "
            "WHERE c.workspace_id = %s AND c.space_id = %s AND c.state = 'pending' AND c.available_at > now()",
            [workspace_id, space.pk],
        )
        value = cursor.fetchone()[0]
    return None if value is None else max(0.0, float(value))


def has_claimable(workspace_id: int) -> bool:
    space = _claim_space(workspace_id)
    if space is None:
        return False
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {TABLE} c WHERE {CLAIMABLE})", [workspace_id, space.pk])
        return bool(cursor.fetchone()[0])


def workspaces_with_work(limit: int | None = None) -> list[int]:
    """Routing metadata only (workspace ids), bounded: never content, keys or vectors."""
    if connection.vendor != "postgresql":
        return []
    if limit is None:
        limit = MULTI_WORKSPACE_CANDIDATES if multi_workspace() else SINGLE_WORKSPACE_SCAN
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT c.workspace_id FROM {TABLE} c
            WHERE (c.state = 'pending' OR (c.state = 'claimed' AND c.lease_until < now()))
              AND (c.available_at IS NULL OR c.available_at <= now()) AND c.space_id IS NOT NULL
            GROUP BY c.workspace_id ORDER BY min(c.available_at) NULLS FIRST LIMIT %s
            """,
            [limit],
        )
        return [int(row[0]) for row in cursor.fetchall()]


# --- failures and the sweep -------------------------------------------------------------------


def retryable(exc: BaseException) -> bool:
    """Transient failures (provider timeouts, 429, 5xx; a lost connection, deadlock or lock timeout)."""
    from knowledge.embeddings.providers import ProviderError

    if isinstance(exc, ProviderError):
        return exc.retryable
    return isinstance(exc, OperationalError | InterfaceError)


def retry_countdown(exc: BaseException, retries: int) -> float:
    """Seconds before a retry: the provider's Retry-After, else exponential backoff with full jitter."""
    from knowledge.embeddings.providers import backoff_seconds

    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        return min(float(retry_after), SYNC_MAX_BACKOFF_SECONDS)
    return backoff_seconds(retries + 1, base=1.0, cap=SYNC_MAX_BACKOFF_SECONDS)


def error_text(exc: BaseException) -> str:
    """A failure as status shows it: provider messages are safe, anything else by its type only."""
    from knowledge.embeddings.providers import ProviderError

    if isinstance(exc, ProviderError):
        return f"{exc.code}: {exc}"[:300]
    return f"sync_failed: {type(exc).__name__}"


def sync_failed(document_id: Any, exc: BaseException) -> int:
    """A chunk sync that failed for good (permanent, or out of retries): show it and let the sweep retry.

    A `ChunkSyncFailure` row keeps the error and the cool-down even for a first sync, which has no
    chunks to carry them; the document's chunks of older versions (never claimable) are marked failed.
    """
    logger.warning("embeddings: chunking document %s failed: %s", document_id, error_text(exc))
    retry_at = ExpressionWrapper(Now() + timedelta(seconds=failed_retry_seconds()), output_field=DateTimeField())
    try:
        with transaction.atomic():
            if Document.objects.filter(pk=document_id).exists():
                ChunkSyncFailure.objects.update_or_create(
                    document_id=document_id, defaults={"last_error": error_text(exc), "available_at": retry_at}
                )
        return (
            EmbeddingChunk.objects.filter(document_id=document_id)
            .exclude(version_id=F("document__current_version_id"))
            .update(
                state=ChunkState.FAILED,
                claim_token="",
                lease_until=None,
                last_error=error_text(exc),
                available_at=retry_at,
            )
        )
    except DatabaseError:
        logger.warning("embeddings: could not record the failed chunking of document %s", document_id)
        return 0


def _stale(workspace_id: int | None) -> Any:
    """Live documents whose current version has no chunks: a chunk sync that failed or was lost."""
    current = EmbeddingChunk.objects.filter(document_id=OuterRef("pk"), version_id=OuterRef("current_version_id"))
    documents = Document.objects.filter(
        current_version__isnull=False, current_version__char_length__gt=0, archived=False, namespace__archived=False
    ).filter(~Exists(current))
    if workspace_id is not None:
        documents = documents.filter(namespace__workspace_id=workspace_id)
    return documents


def stale_documents(workspace_id: int | None = None, *, limit: int = STALE_SWEEP) -> list[str]:
    """Ids of up to `limit` stale documents to chunk again (not those whose failure is cooling down).

    Picked at random, so a few documents that keep failing cannot hold the others back.
    """
    cooling = ChunkSyncFailure.objects.filter(document_id=OuterRef("pk"), available_at__gt=Now())
    candidates = _stale(workspace_id).filter(~Exists(cooling)).order_by("?")
    ids = list(candidates.values_list("id", flat=True)[: limit * 4])
    if not ids:
        return []
    # Whitespace-only content has no chunks, so it is never stale; its text is read for candidates only.
    blank = Document.objects.filter(id__in=ids).exclude(current_version__content__regex=r"\S")
    skip = set(blank.values_list("id", flat=True))
    return [str(document_id) for document_id in ids if document_id not in skip][:limit]


def requeue_failed(workspace_id: int | None = None) -> int:
    """Failed chunks of current versions whose cool-down is over go back to the queue, attempts reset.

    The last error stays until a success clears it, so status keeps saying what went wrong.
    """
    chunks = EmbeddingChunk.objects.filter(state=ChunkState.FAILED, version_id=F("document__current_version_id"))
    if workspace_id is not None:
        chunks = chunks.filter(workspace_id=workspace_id)
    due = chunks.filter(Q(available_at__isnull=True) | Q(available_at__lte=Now()))  # database time, as leases
    return due.update(state=ChunkState.PENDING, attempts=0, available_at=None, claim_token="", lease_until=None)


# --- invalidation ---------------------------------------------------------------------------


def policy_changed(workspace_id: int, before: dict[str, Any], after: dict[str, Any], key_changed: bool) -> None:
    """Re-queue exactly the chunks a settings change affects, fencing claims in flight."""
    if before["chunking"] != after["chunking"]:
        chunks_sync_many(
            Document.objects.filter(namespace__workspace_id=workspace_id).values_list("id", flat=True), force=True
        )
    if not vectors_possible(after):
        EmbeddingChunk.objects.filter(workspace_id=workspace_id, state=ChunkState.CLAIMED).update(
            state=ChunkState.PENDING, claim_token="", lease_until=None
        )
        _bump_generation(workspace_id, state=ChunkState.PENDING)
        return
    space = space_for(workspace_id, after)
    space_changed = any(before[f] != after[f] for f in semantic.SPACE_FIELDS) or not vectors_possible(before)
    if space_changed:
        unchunked = Document.objects.filter(namespace__workspace_id=workspace_id, embedding_chunks__isnull=True)
        chunks_sync_many(unchunked.values_list("id", flat=True))
    with transaction.atomic(), connection.cursor() as cursor:
        if space_changed:
            cursor.execute(
                f"""
                UPDATE {TABLE} c SET space_id = %s, generation = c.generation + 1, claim_token = '',
                    lease_until = NULL, available_at = NULL, attempts = 0, last_error = '',
                    state = CASE WHEN EXISTS (SELECT 1 FROM {store.TABLE} v WHERE v.chunk_id = c.id AND v.space_id = %s)
                        THEN 'embedded' ELSE 'pending' END
                WHERE c.workspace_id = %s AND c.space_id IS DISTINCT FROM %s
                """,
                [space.pk, space.pk, workspace_id, space.pk],
            )
        elif key_changed or (before["indexing"]["paused"] != after["indexing"]["paused"]):
            cursor.execute(
                f"""
                UPDATE {TABLE} c SET generation = c.generation + 1, claim_token = '', lease_until = NULL,
                    available_at = NULL, attempts = 0, last_error = '', state = 'pending'
                WHERE c.workspace_id = %s AND c.state IN ('claimed', 'failed')
                """,
                [workspace_id],
            )


def _bump_generation(workspace_id: int, *, state: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET generation = generation + 1 WHERE workspace_id = %s AND state = %s",
            [workspace_id, state],
        )


def reindex(workspace_id: int) -> dict[str, int]:
    """Rebuild every chunk of the workspace and re-queue failed work (vectors are reused by hash)."""
    documents = Document.objects.filter(namespace__workspace_id=workspace_id).values_list("id", flat=True)
    rebuilt = chunks_sync_many(documents, force=True)
    requeued = EmbeddingChunk.objects.filter(workspace_id=workspace_id, state=ChunkState.FAILED).update(
        state=ChunkState.PENDING, attempts=0, last_error="", available_at=None
    )
    return {"chunks": rebuilt, "requeued": requeued}


# --- status ---------------------------------------------------------------------------------


def indexing_status(workspace_id: int) -> dict[str, Any]:
    row, policy = workspace_policy(workspace_id)
    vectors = store.status()
    counts = dict.fromkeys(ChunkState.values, 0)
    space = active_space(workspace_id)
    queryset = EmbeddingChunk.objects.filter(workspace_id=workspace_id)
    for state, total in _state_counts(queryset):
        counts[state] = total
    last = queryset.filter(state=ChunkState.EMBEDDED).order_by("-embedded_at").values_list("embedded_at", flat=True)
    sync_failures = ChunkSyncFailure.objects.filter(document__in=_stale(workspace_id))
    last_error = (
        queryset.exclude(last_error="").order_by("-attempts").values_list("last_error", flat=True).first()
        or sync_failures.values_list("last_error", flat=True).first()
        or None
    )
    configured = policy["provider"] == "local" or bool(row.api_key_sealed)
    return {
        "enabled": policy["enabled"],
        "configured": configured,
        "paused": policy["indexing"]["paused"],
        "database": connection.vendor,
        **vectors.as_dict(),
        "provider": policy["provider"],
        "model": policy["model"],
        "dimensions": policy["dimensions"],
        "space_id": space.pk if space else None,
        "chunks": counts,
        "queue_depth": counts[ChunkState.PENDING] + counts[ChunkState.CLAIMED],
        "last_indexed_at": last.first(),
        "last_error": last_error,
        "unsynced_documents": _stale(workspace_id).filter(current_version__content__regex=r"\S").count(),
        "unavailable_reason": unavailable_reason(workspace_id),
    }


def _state_counts(queryset: Any) -> list[tuple[str, int]]:
    from django.db.models import Count

    return list(queryset.values("state").annotate(total=Count("id")).values_list("state", "total"))


def unavailable_reason(workspace_id: int, loaded: LoadedPolicy | None = None) -> str | None:
    """Why semantic search cannot run here, or None (the policy's own answer)."""
    row, policy = loaded or workspace_policy(workspace_id)
    return semantic.unavailable_reason(policy, bool(row.api_key_sealed))


def empty_indexing() -> dict[str, int]:
    return {"chunks": 0, **dict.fromkeys(ChunkState.values, 0)}


def document_indexing(document_ids: list[Any]) -> dict[str, dict[str, Any]]:
    """Per document: chunk counts by state (for `?include=indexing`)."""
    from django.db.models import Count

    result: dict[str, dict[str, Any]] = {}
    rows = (
        EmbeddingChunk.objects.filter(document_id__in=document_ids)
        .values("document_id", "state")
        .annotate(total=Count("id"))
    )
    for row in rows:
        entry = result.setdefault(str(row["document_id"]), empty_indexing())
        entry[row["state"]] = row["total"]
        entry["chunks"] += row["total"]
    return result
