"""Semantic and hybrid retrieval over the active embedding space.

The access filter is the same SQL scope as text search, applied inside the vector query. An HNSW
scan that filters rows afterwards can run out of candidates (at a 10% ACL it returns about 4 of
10 rows), so the index runs with pgvector's iterative scan; when it still returns fewer rows than
asked, an exact scan over the permitted rows answers instead, so a page is full whenever enough
readable matches exist.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from config.exceptions import Invalid
from knowledge.embeddings import pipeline, store
from knowledge.models import EmbeddingSpace
from workspaces import semantic

CHUNKS_PER_DOCUMENT = 3
MAX_CANDIDATE_CHUNKS = 2000
# A matched chunk shows this much of its text. The vector queries read no more than that (plus one
# character, to tell a cut text from a whole one): a page's 80 chunks would otherwise carry about
# 300 KB of text that PostgreSQL decompresses and the response throws away.
SNIPPET_CHARS = 400


@dataclass
class SemanticMatch:
    document_id: Any
    score: float
    chunks: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class SemanticResult:
    matches: list[SemanticMatch]
    total: int
    exact: bool
    embed_ms: float
    search_ms: float


def unavailable(workspace_id: int, mode: str) -> Invalid:
    reason = pipeline.unavailable_reason(workspace_id) or "the embedding provider could not embed the query."
    return Invalid(
        f"{mode.capitalize()} search is unavailable: {reason} Use mode=text.",
        code="semantic_unavailable",
        reason=reason,
    )


def embed_query(
    workspace_id: int, text: str, loaded: pipeline.LoadedPolicy | None = None
) -> tuple[EmbeddingSpace, list[float], float]:
    """The query's vector in the active space; provider failures are 400 semantic_unavailable.

    `loaded` is the workspace's policy when the caller has just read it."""
    from knowledge.embeddings.providers import ProviderError, provider_for, spec_from_policy

    row, policy = loaded or pipeline.workspace_policy(workspace_id)
    if semantic.unavailable_reason(policy, bool(row.api_key_sealed)):
        raise unavailable(workspace_id, "semantic")
    key = pipeline.workspace_key(row, policy)
    started = time.perf_counter()
    try:
        spec = spec_from_policy(policy, key, max_attempts=2, max_backoff=2.0)  # a person is waiting
        vector = provider_for(spec).embed([text])[0]
    except ProviderError as exc:
        raise Invalid(
            f"Semantic search is unavailable: the embedding provider failed ({exc.code}). Use mode=text.",
            code="semantic_unavailable",
            reason=f"provider: {exc.code}",
        ) from None
    return pipeline.space_for(workspace_id, policy), vector, (time.perf_counter() - started) * 1000


# HNSW candidates per wanted chunk, divided by the share of documents the scope keeps. With
# ef_construction 128, 400 candidates for 40 chunks reach recall@10 0.95 on the 10,000-document
# bench (200 gave 0.92).
OVERFETCH = 10
# A filtered HNSW scan misses near readable chunks (recall@10 about 0.89 at an 8% scope, however
# long the list), so a scope that would need more candidates than this compares its own vectors
# exactly instead, unless it keeps most documents anyway.
MAX_APPROXIMATE_CANDIDATES = 1000
HNSW_MAX_EF_SEARCH = 1000  # pgvector refuses more; iterative scans go on past it
BROAD_SHARE = 0.5


def _chunk_rows(
    space: EmbeddingSpace,
    vector: list[float],
    scope_sql: str,
    scope_params: list[Any],
    fetch: int,
    *,
    exact: bool,
    share: float = 1.0,
) -> list[tuple[Any, ...]]:
    """Nearest readable chunks of current versions; `scope_sql` is `selectors.search_scope`'s.

    Approximate: the HNSW index alone yields enough candidates, iteratively scanned, for `fetch`
    of them to pass the access filter when the scope keeps `share` of the documents; each
    candidate is then checked by key (LATERAL keeps the planner from building the whole readable
    chunk set first, which it does when it underestimates that set: over a second at 8%).
    Exact: every readable vector is compared, which is cheap precisely when the filter is selective.
    """
    cast, _ = store.vector_type(space.dimensions)
    distance = f"(v.embedding::{cast} <=> %s::{cast})"
    columns = f"c.document_id, c.heading_path, c.anchor, c.start_line, c.end_line, left(c.text, {SNIPPET_CHARS + 1})"
    if exact:
        # The readable documents' current vectors, through the vectors' (space, document) index,
        # joined to the scope's (id, current_version_id) rows. The scope is materialized first:
        # inlined, the planner expects one vector per document and checks the namespace's
        # workspace once per vector instead of once per document. The distance is written on the
        # stored column, not on the HNSW index's cast expression, so the planner cannot answer it
        # from the approximate index.
        sql = f"""
            WITH d AS MATERIALIZED ({scope_sql})
            SELECT n.chunk_id, n.distance, {columns} FROM (
                SELECT v.chunk_id, (v.embedding <=> %s::vector) AS distance
                FROM d
                JOIN {store.TABLE} v ON v.space_id = %s AND v.document_id = d.id AND v.version_id = d.current_version_id
                ORDER BY distance LIMIT %s
            ) n JOIN knowledge_embeddingchunk c ON c.id = n.chunk_id
            ORDER BY n.distance
        """
        params = [*scope_params, store.literal(vector), space.pk, fetch]
    else:
        candidates = min(MAX_CANDIDATE_CHUNKS * OVERFETCH, max(200, approximate_candidates(fetch, share)))
        sql = f"""
            WITH nearest AS MATERIALIZED (
                SELECT v.chunk_id, {distance} AS distance FROM {store.TABLE} v
                WHERE v.space_id = %s ORDER BY distance LIMIT %s
            )
            SELECT n.chunk_id, n.distance, {columns} FROM nearest n
            CROSS JOIN LATERAL (
                SELECT * FROM knowledge_embeddingchunk c WHERE c.id = n.chunk_id LIMIT 1
            ) c
            JOIN knowledge_document d ON d.id = c.document_id AND d.current_version_id = c.version_id
            WHERE c.document_id IN (SELECT s.id FROM ({scope_sql}) s)
            ORDER BY n.distance LIMIT %s
        """
        params = [store.literal(vector), int(space.pk), candidates, *scope_params, fetch]
    with transaction.atomic(), connection.cursor() as cursor:
        if not exact:
            cursor.execute(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                "set_config('hnsw.ef_search', %s, true)",
                [str(min(HNSW_MAX_EF_SEARCH, candidates))],
            )
        cursor.execute(sql, params)
        return cursor.fetchall()


def approximate_candidates(fetch: int, share: float) -> int:
    """HNSW candidates for `fetch` of them to pass an access filter that keeps `share` of documents."""
    return math.ceil(fetch * OVERFETCH / min(1.0, max(share, 0.01)))


def nearest_chunks(
    space: EmbeddingSpace, vector: list[float], scope_sql: str, scope_params: list[Any], fetch: int, share: float = 1.0
) -> tuple[list[tuple[Any, ...]], bool]:
    """Up to `fetch` readable chunks, nearest first; (rows, exact?).

    `share` estimates the fraction of the workspace's documents the scope keeps: a scope that
    would need a candidate list over MAX_APPROXIMATE_CANDIDATES goes straight to the exact
    comparison; otherwise it sizes the approximate list, and a page that list leaves short is
    completed exactly.
    """
    approximate = share >= BROAD_SHARE or approximate_candidates(fetch, share) <= MAX_APPROXIMATE_CANDIDATES
    if approximate:
        rows = _chunk_rows(space, vector, scope_sql, scope_params, fetch, exact=False, share=share)
        if len(rows) >= fetch:
            return rows, False
    return _chunk_rows(space, vector, scope_sql, scope_params, fetch, exact=True), True


def semantic_search(
    *,
    workspace_id: int,
    text: str,
    scope_sql: str,
    scope_params: list[Any],
    limit: int,
    offset: int,
    min_similarity: float = 0.0,
    share: float = 1.0,
    loaded: pipeline.LoadedPolicy | None = None,
) -> SemanticResult:
    """Documents ranked by their best chunk's cosine similarity, with up to three matching chunks each."""
    space, vector, embed_ms = embed_query(workspace_id, text, loaded)
    wanted = offset + limit
    fetch = min(MAX_CANDIDATE_CHUNKS, max(40, wanted * 4))
    started = time.perf_counter()
    while True:
        rows, exact = nearest_chunks(space, vector, scope_sql, scope_params, fetch, share)
        matches = _group(rows, min_similarity)
        exhausted = len(rows) < fetch or (rows and 1 - float(rows[-1][1]) < min_similarity)
        if len(matches) >= wanted or exhausted or fetch >= MAX_CANDIDATE_CHUNKS:
            break
        fetch = min(MAX_CANDIDATE_CHUNKS, fetch * 4)
    search_ms = (time.perf_counter() - started) * 1000
    return SemanticResult(matches[offset:wanted], len(matches), exact, embed_ms, search_ms)


def _group(rows: list[tuple[Any, ...]], min_similarity: float) -> list[SemanticMatch]:
    by_document: dict[Any, SemanticMatch] = {}
    for chunk_id, distance, document_id, heading_path, anchor, start_line, end_line, body in rows:
        score = round(1.0 - float(distance), 6)
        if score < min_similarity:
            continue
        if isinstance(heading_path, str):  # raw cursors hand jsonb back as text under Django
            heading_path = json.loads(heading_path)
        match = by_document.get(document_id)
        if match is None:
            match = by_document[document_id] = SemanticMatch(document_id, score)
        if len(match.chunks) < CHUNKS_PER_DOCUMENT:
            snippet = body if len(body) <= SNIPPET_CHARS else body[: SNIPPET_CHARS - 1].rstrip() + "…"
            match.chunks.append(
                {
                    "chunk_id": str(chunk_id),
                    "heading_path": heading_path,
                    "anchor": anchor,
                    "start_line": start_line,
                    "end_line": end_line,
                    "snippet": snippet,
                    "score": score,
                }
            )
    return sorted(by_document.values(), key=lambda m: -m.score)


def reciprocal_rank_fusion(rankings: list[list[Any]], *, k: int | None = None) -> list[tuple[Any, float]]:
    """Sum of 1 / (k + rank) over the rankings a document appears in (ranks start at 1)."""
    k = settings.KNOWLEDGE_RRF_K if k is None else k
    scores: dict[Any, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], str(item[0])))
