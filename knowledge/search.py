"""Full-text search: chunk-level index upkeep and ranked, access-filtered queries.

SQLite uses FTS5 (bm25, porter stemming); PostgreSQL a weighted tsvector per chunk with a
GIN index (ts_rank scaled by inverse document frequency). Both index ~2 KB chunks, so large
documents rank past tsvector's position limits and snippets never read whole bodies. The
access filter is a subquery inside the same SQL statement, applied before ranking and limit.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import zlib
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.db import DatabaseError, connection, transaction

from config.db_workers import side_queries
from knowledge.models import Document, SearchChunk, SearchTerm
from knowledge.search_query import Clause, ParsedQuery, Term

# Chunks end at a paragraph break chosen by the text before it (content-defined), so an edit
# re-chunks only its neighbourhood and every other chunk keeps its row and its tsvector.
CHUNK_MIN_CHARS = 600
CHUNK_MAX_CHARS = 3000
BOUNDARY_ODDS = 3  # about one paragraph break in three may end a chunk
HEADER_ORDINAL = -1
PROXIMITY_CLAUSE = -1
SNIPPET_MAX_CHARS = 1200
SEARCH_VECTOR_INDEX = "knowledge_searchchunk_vector"  # migration 0003

logger = logging.getLogger(__name__)


# --- index upkeep --------------------------------------------------------------------------


def _ends_chunk(previous: str, line: str) -> bool:
    """A blank line after a paragraph whose last line hashes onto the boundary residue."""
    return not line.strip() and bool(previous.strip()) and zlib.crc32(previous.encode()) % BOUNDARY_ODDS == 0


def chunk_lines(content: str) -> list[tuple[int, int, str]]:
    """Split content at line boundaries into pieces of 600–3,000 characters: (start_line, end_line, text).

    A chunk ends at a paragraph break that `_ends_chunk` picks once it holds CHUNK_MIN_CHARS,
    or before it would pass CHUNK_MAX_CHARS; a longer line is cut into pieces of its own.
    """
    lines = content.replace("\r\n", "\n").split("\n")
    chunks: list[tuple[int, int, str]] = []
    buffer: list[str] = []
    size = 0
    start = 1
    previous = ""
    for number, line in enumerate(lines, start=1):
        while len(line) > CHUNK_MAX_CHARS:  # one enormous line: cut it, keep its line number
            if buffer:
                chunks.append((start, number - 1, "\n".join(buffer)))
                buffer, size = [], 0
            chunks.append((number, number, line[:CHUNK_MAX_CHARS]))
            line = line[CHUNK_MAX_CHARS:]
        if buffer and size + len(line) > CHUNK_MAX_CHARS:
            chunks.append((start, number - 1, "\n".join(buffer)))
            buffer, size = [], 0
        if not buffer:
            start = number
        buffer.append(line)
        size += len(line) + 1
        if size >= CHUNK_MIN_CHARS and _ends_chunk(previous, line):
            chunks.append((start, number, "\n".join(buffer)))
            buffer, size = [], 0
        previous = line
    if buffer and any(part.strip() for part in buffer):
        chunks.append((start, len(lines), "\n".join(buffer)))
    return chunks


def _path_words(path: str) -> str:
    return re.sub(r"[/._\-]+", " ", path)


def _header(document: Document) -> SearchChunk:
    return SearchChunk(
        document=document,
        ordinal=HEADER_ORDINAL,
        title=document.title,
        path_text=_path_words(document.path),
    )


ChunkRow = tuple[int, int, int, str, str, str]  # ordinal, start_line, end_line, title, path_text, text


def _chunk_key(title: str, path_text: str, text: str) -> str:
    """What a chunk's tsvector depends on (PostgreSQL computes the same md5 in `_stored_chunks`)."""
    return hashlib.md5(f"{title}\x01{path_text}\x01{text}".encode()).hexdigest()


def _stored_chunks(document_id: UUID) -> list[tuple[int, int, int, int, str]]:
    """(id, ordinal, start_line, end_line, key) of the document's chunk rows."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT id, ordinal, start_line, end_line, md5(title || chr(1) || path_text || chr(1) || text) "
                "FROM knowledge_searchchunk WHERE document_id = %s",
                [document_id],
            )
            return cursor.fetchall()
        cursor.execute(
            "SELECT id, ordinal, start_line, end_line, title, path_text, text FROM knowledge_searchchunk "
            "WHERE document_id = %s",
            [document_id.hex],
        )
        return [(row[0], row[1], row[2], row[3], _chunk_key(*row[4:])) for row in cursor.fetchall()]


def index_document(document: Document, content: str, *, from_scratch: bool = False, new: bool = False) -> None:
    """Bring the document's chunks in line with its current content (same transaction).

    Rows whose text is unchanged are kept and only moved, so a save computes tsvectors, index
    entries and term counts for the chunks its edit touched, not for the whole document.
    `from_scratch` deletes the document's rows and writes every row anew (the reindex command's
    repair); `new` writes them the same way for a document that has no rows yet, without deleting.
    """
    header = _header(document)
    rows: list[ChunkRow] = [(HEADER_ORDINAL, 1, 1, header.title, header.path_text, "")] + [
        (i, start, end, "", "", text) for i, (start, end, text) in enumerate(chunk_lines(content))
    ]
    length = term_length(len(content))
    if from_scratch or new:
        _write_from_scratch(document.pk, rows, length, replace=not new)
        return
    stored: dict[str, list[tuple[int, int, int, int]]] = {}
    for chunk_id, ordinal, start, end, key in _stored_chunks(document.pk):
        stored.setdefault(key, []).append((chunk_id, ordinal, start, end))
    moved: list[tuple[int, int, int, int]] = []
    added: list[ChunkRow] = []
    for row in rows:
        matches = stored.get(_chunk_key(*row[3:]))
        if not matches:
            added.append(row)
            continue
        chunk_id, ordinal, start, end = matches.pop()
        if (ordinal, start, end) != row[:3]:
            moved.append((chunk_id, *row[:3]))
    removed = [match[0] for matches in stored.values() for match in matches]
    if len(rows) - len(added) <= 1:  # at most the header kept: writing anew beats a delta
        _write_from_scratch(document.pk, rows, length)
        return
    added_ids = _insert_chunks(document.pk, added) if added else []
    # A delta reads the tsvectors of added and removed chunks; past the kept ones, a recount is cheaper.
    recount = len(added) + len(removed) > len(rows) - len(added)
    if not recount:
        _update_terms(document.pk, added_ids=added_ids, removed_ids=removed, length=length)
    if removed:
        SearchChunk.objects.filter(id__in=removed)._raw_delete(using="default")
    if moved:
        _move_chunks(moved)
    if recount:
        _rebuild_terms(document.pk, length)


def _write_from_scratch(document_id: UUID, rows: list[ChunkRow], length: int, *, replace: bool = True) -> None:
    if replace:
        SearchChunk.objects.filter(document_id=document_id)._raw_delete(using="default")
    _insert_chunks(document_id, rows)
    _rebuild_terms(document_id, length, replace=replace)


def _move_chunks(moved: list[tuple[int, int, int, int]]) -> None:
    """New ordinals and line numbers for kept rows: (id, ordinal, start_line, end_line).

    PostgreSQL does not recompute the generated tsvector, which depends on none of them.
    """
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            ids, ordinals, starts, ends = (list(column) for column in zip(*moved, strict=True))
            cursor.execute(
                "UPDATE knowledge_searchchunk c SET ordinal = m.ordinal, start_line = m.start_line, "
                "end_line = m.end_line FROM unnest(%s::bigint[], %s::int[], %s::int[], %s::int[]) "
                "AS m(id, ordinal, start_line, end_line) WHERE c.id = m.id",
                [ids, ordinals, starts, ends],
            )
        else:
            cursor.executemany(
                "UPDATE knowledge_searchchunk SET ordinal = %s, start_line = %s, end_line = %s WHERE id = %s",
                [(ordinal, start, end, chunk_id) for chunk_id, ordinal, start, end in moved],
            )


# PostgreSQL's GIN index takes new entries into a pending list and merges the list into the
# index when it passes `gin_pending_list_limit` (4 MB by default), in the inserting statement.
# A write of this many chunks would merge its own entries (seconds for a 10 MiB document): it
# raises the limit for its transaction and leaves the merge to a worker (`flush_pending_entries`).
DEFERRED_MERGE_CHUNKS = 400
DEFERRED_MERGE_LIMIT_KB = 256 * 1024


# A chunk's tsvector (PostgreSQL): title words weigh most, then path words, then the body. The
# statement that writes the row computes it (migration 0013).
CHUNK_VECTOR = (
    "setweight(to_tsvector('english', {title}), 'A') || setweight(to_tsvector('english', {path}), 'B') "
    "|| setweight(to_tsvector('english', {text}), 'D')"
)
# From this many chunks, a second connection computes the second half's tsvectors while the
# writing one computes the first half's: to_tsvector is most of a large write's cost (about a
# second on one core for the ~7,000 chunks of a 10 MiB body).
SPLIT_VECTOR_CHUNKS = 1000
# CHUNK_VECTOR over the columns of `unnest(...) AS u(..., title, path, body, ...)`.
_UNNESTED_VECTOR = CHUNK_VECTOR.format(title="u.title", path="u.path", text="u.body")


def _insert_chunks(document_id: UUID, rows: list[ChunkRow]) -> list[int]:
    """Plain SQL: a 10 MiB document has ~7,000 chunks, and model instances would cost ~1 s.

    Returns the new rows' ids on PostgreSQL (its term counts need them), nothing on SQLite.
    """
    columns = "document_id, ordinal, start_line, end_line, title, path_text, text"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            if len(rows) >= DEFERRED_MERGE_CHUNKS and connection.in_atomic_block:
                _defer_gin_merge(cursor)
            split = len(rows) // 2 if len(rows) >= SPLIT_VECTOR_CHUNKS else len(rows)
            head, tail = rows[:split], rows[split:]
            beside = side_queries.submit(lambda: chunk_vectors(tail), independent=True) if tail else None
            ids = _insert_pg_rows(cursor, document_id, head) if head else []
            if beside is not None:
                try:
                    vectors = beside.result()
                except DatabaseError:  # the second connection failed: compute them here instead
                    vectors = None
                ids += _insert_pg_rows(cursor, document_id, tail, vectors=vectors)
            return ids
        # SQLite keeps UUIDs as 32 hex digits; its insert trigger fills FTS5
        cursor.executemany(
            f"INSERT INTO knowledge_searchchunk ({columns}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [(document_id.hex, *row) for row in rows],
        )
        return []


def _insert_pg_rows(
    cursor: Any, document_id: UUID, rows: list[ChunkRow], vectors: list[str] | None = None
) -> list[int]:
    """Insert chunk rows with their tsvectors: computed here, or `vectors` computed elsewhere."""
    ordinals, starts, ends, titles, paths, texts = (list(column) for column in zip(*rows, strict=True))
    columns = "document_id, ordinal, start_line, end_line, title, path_text, text, search_vector"
    unnest = "unnest(%s::int[], %s::int[], %s::int[], %s::text[], %s::text[], %s::text[]"
    params: list[Any] = [document_id, ordinals, starts, ends, titles, paths, texts]
    if vectors is None:
        vector = _UNNESTED_VECTOR
        source = f"{unnest}) AS u(ordinal, start_line, end_line, title, path, body)"
    else:
        vector = "u.vector"
        source = f"{unnest}, %s::tsvector[]) AS u(ordinal, start_line, end_line, title, path, body, vector)"
        params.append(vectors)
    cursor.execute(
        f"INSERT INTO knowledge_searchchunk ({columns}) "
        f"SELECT %s, u.ordinal, u.start_line, u.end_line, u.title, u.path, u.body, {vector} FROM {source} "
        "RETURNING id",
        params,
    )
    return [row[0] for row in cursor.fetchall()]


def chunk_vectors(rows: list[ChunkRow]) -> list[str]:
    """The tsvectors of these chunk rows, in order, as PostgreSQL's text form (reads no table)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_UNNESTED_VECTOR} FROM unnest(%s::text[], %s::text[], %s::text[]) "
            "WITH ORDINALITY AS u(title, path, body, n) ORDER BY u.n",
            [[row[3] for row in rows], [row[4] for row in rows], [row[5] for row in rows]],
        )
        return [row[0] for row in cursor.fetchall()]


def _defer_gin_merge(cursor: Any) -> None:
    """Raise the pending-list limit for this transaction and, on its first large write only,
    queue the merge for after commit (one merge covers every document the transaction wrote)."""
    from knowledge import hooks

    cursor.execute(
        "SELECT current_setting('gin_pending_list_limit'), set_config('gin_pending_list_limit', %s, true)",
        [str(DEFERRED_MERGE_LIMIT_KB)],
    )
    before, after = cursor.fetchone()
    if before != after:
        transaction.on_commit(hooks.queue_search_merge)


def flush_pending_entries() -> int:
    """Merge the chunk GIN index's pending list into the index (PostgreSQL); returns pages merged.

    A concurrent merge makes this return at once (PostgreSQL lets one backend merge at a time).
    """
    if connection.vendor != "postgresql":
        return 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list(%s::regclass)", [SEARCH_VECTOR_INDEX])
        return cursor.fetchone()[0]


def index_header(document: Document) -> None:
    """Re-index only title and path (after a rename or move)."""
    header = _header(document)
    removed = list(SearchChunk.objects.filter(document=document, ordinal=HEADER_ORDINAL).values_list("id", flat=True))
    added_ids = _insert_chunks(document.pk, [(HEADER_ORDINAL, 1, 1, header.title, header.path_text, "")])
    length = term_length(document.current_version.char_length)
    _update_terms(document.pk, added_ids=added_ids, removed_ids=removed, length=length)
    SearchChunk.objects.filter(id__in=removed)._raw_delete(using="default")


# PostgreSQL keeps per-document term counts (SearchTerm) for BM25, summed from the chunks'
# tsvectors: body chunks give body_tf, the header gives title_tf. `{chunks}` selects
# (ordinal, search_vector, sign) rows; a sign of -1 subtracts a chunk that is going away.
_TERM_COUNTS = """
    SELECT t.lexeme,
           SUM(CASE WHEN c.ordinal >= 0 THEN c.sign * COALESCE(array_length(t.positions, 1), 1) ELSE 0 END)
               AS body_tf,
           SUM(CASE WHEN c.ordinal < 0 THEN c.sign * COALESCE(array_length(t.positions, 1), 1) ELSE 0 END)
               AS title_tf
    FROM ({chunks}) c, unnest(c.search_vector) t
    WHERE length(t.lexeme) <= 255
    GROUP BY t.lexeme
"""
_CHUNKS_CHANGED = (
    "SELECT ordinal, search_vector, 1 AS sign FROM knowledge_searchchunk WHERE id = ANY(%s::bigint[]) "
    "UNION ALL SELECT ordinal, search_vector, -1 FROM knowledge_searchchunk WHERE id = ANY(%s::bigint[])"
)
LENGTH_STEP = 1.1


def term_length(char_length: int) -> int:
    """BM25's document length: about one indexed word per 8 characters, in 10% steps, so that
    an ordinary edit leaves it (and every term row of the document) unchanged."""
    words = max(char_length / 8, 1.0)
    return round(LENGTH_STEP ** round(math.log(words, LENGTH_STEP)))


# The same counts for all of a document's chunks: ts_stat tallies tsvectors in C, about twice as
# fast as unnesting them, which matters for the ~6,000 chunks of a rewritten 10 MiB document.
_DOCUMENT_TERM_COUNTS = """
    SELECT word AS lexeme, COALESCE(body.nentry, 0) AS body_tf, COALESCE(header.nentry, 0) AS title_tf
    FROM ts_stat(format(
        'SELECT search_vector FROM knowledge_searchchunk WHERE document_id = %%L AND ordinal >= 0', %s::uuid
    )) body
    FULL JOIN ts_stat(format(
        'SELECT search_vector FROM knowledge_searchchunk WHERE document_id = %%L AND ordinal < 0', %s::uuid
    )) header USING (word)
    WHERE length(word) <= 255
"""


def _rebuild_terms(document_id: UUID, length: int, *, replace: bool = True) -> None:
    """PostgreSQL: the document's term rows from all its chunks, in one statement."""
    if connection.vendor != "postgresql":
        return
    if replace:
        SearchTerm.objects.filter(document_id=document_id)._raw_delete(using="default")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO knowledge_searchterm (document_id, lexeme, body_tf, title_tf, doc_length) "
            f"SELECT %s, lexeme, body_tf, title_tf, %s FROM ({_DOCUMENT_TERM_COUNTS}) t",
            [document_id, length, document_id, document_id],
        )


def _update_terms(document_id: UUID, *, added_ids: list[int], removed_ids: list[int], length: int) -> None:
    """PostgreSQL: apply what added and removed chunks change to the term rows (call while both
    are still stored), then set the document length where it moved."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        if added_ids or removed_ids:
            delta = _TERM_COUNTS.format(chunks=_CHUNKS_CHANGED)
            cursor.execute(
                f"""
                WITH delta AS ({delta}),
                old AS (
                    DELETE FROM knowledge_searchterm s
                    WHERE s.document_id = %s AND s.lexeme IN (
                        SELECT lexeme FROM delta WHERE body_tf <> 0 OR title_tf <> 0
                    )
                    RETURNING s.lexeme, s.body_tf, s.title_tf
                )
                INSERT INTO knowledge_searchterm (document_id, lexeme, body_tf, title_tf, doc_length)
                SELECT %s, d.lexeme, COALESCE(old.body_tf, 0) + d.body_tf, COALESCE(old.title_tf, 0) + d.title_tf, %s
                FROM delta d LEFT JOIN old ON old.lexeme = d.lexeme
                WHERE (d.body_tf <> 0 OR d.title_tf <> 0)
                  AND COALESCE(old.body_tf, 0) + d.body_tf + COALESCE(old.title_tf, 0) + d.title_tf > 0
                """,
                [added_ids, removed_ids, document_id, document_id, length],
            )
        cursor.execute(
            "UPDATE knowledge_searchterm SET doc_length = %s WHERE document_id = %s AND doc_length <> %s",
            [length, document_id, length],
        )


# --- query building ------------------------------------------------------------------------


def _fts5_term(term: Term) -> str:
    return '"' + " ".join(term.words) + '"' + ("*" if term.prefix else "")


def _fts5_clause(clause: Clause) -> str:
    return " OR ".join(_fts5_term(term) for term in clause.alternatives)


def _pg_term(term: Term) -> tuple[str, list[str]]:
    if term.prefix:
        pieces = [re.sub(r"\W+", "", w) or "x" for w in term.words]
        return "to_tsquery('english', %s)", [" <-> ".join([*pieces[:-1], pieces[-1] + ":*"])]
    if term.is_phrase:
        if term.token:
            # PostgreSQL's parser keeps tokens such as "subprocess.run" or "http/2" whole.
            return (
                "(phraseto_tsquery('english', %s) || plainto_tsquery('english', %s))",
                [" ".join(term.words), term.token],
            )
        return "phraseto_tsquery('english', %s)", [" ".join(term.words)]
    return "plainto_tsquery('english', %s)", [term.words[0]]


def _pg_clause(clause: Clause) -> tuple[str, list[str]]:
    parts = [_pg_term(term) for term in clause.alternatives]
    return "(" + " || ".join(sql for sql, _ in parts) + ")", [p for _, params in parts for p in params]


def _hit_select(clause: Clause, index: int) -> tuple[str, list[Any]]:
    """SELECT document_id, chunk_id, ordinal, clause, score for in-scope chunks matching one clause
    (SQLite; PostgreSQL ranks through the term table)."""
    # `rank` is bm25 with the column weights set in migration 0003 (lower is better).
    return (
        f"SELECT c.document_id AS document_id, c.id AS chunk_id, c.ordinal AS ordinal, {index} AS clause, "
        "-f.rank AS score "
        f"FROM knowledge_search_fts f JOIN knowledge_searchchunk c ON c.id = f.rowid "
        f"WHERE knowledge_search_fts MATCH %s AND c.document_id IN (SELECT id FROM scope)",
        [_fts5_clause(clause)],
    )


def _union(indexed: list[tuple[int, Clause]]) -> tuple[str, list[Any]]:
    selects, params = [], []
    for index, clause in indexed:
        sql, clause_params = _hit_select(clause, index)
        selects.append(sql)
        params.extend(clause_params)
    return " UNION ALL ".join(selects), params


@dataclass
class RankedDocument:
    document_id: Any
    coverage: int
    score: float


@dataclass
class SearchResult:
    total: int
    ranked: list[RankedDocument]
    relaxed: bool
    # The query's matching clauses, to pick snippet chunks later (see `best_chunks`).
    indexed: list[tuple[int, Clause]] = field(default_factory=list)

    def best_chunks(self, document_ids: list[Any]) -> dict[Any, SearchChunk]:
        """For each of these documents, the body chunk that best matches the query.

        Asked for separately, for just the documents a page shows snippets of: hybrid search
        ranks many text candidates but shows a few, and `content_mode=none` shows none.
        """
        if not self.indexed or not document_ids:
            return {}
        if connection.vendor == "postgresql":
            return _pg_best_chunks(self.indexed, document_ids)
        return _best_chunks(self.indexed, document_ids)


def _with_proximity(clauses: list[Clause], relaxed: bool) -> list[tuple[int, Clause]]:
    """The clauses by index, plus (for a relaxed query of several words) the words side by side,
    which earn a bonus, not extra coverage."""
    indexed = list(enumerate(clauses))
    if relaxed and len(clauses) >= 2:
        words = tuple(w for c in clauses for w in c.alternatives[0].words)
        indexed.append((PROXIMITY_CLAUSE, Clause((Term(words),))))
    return indexed


def run_search(
    *, query: ParsedQuery, scope_sql: str, scope_params: list[Any], limit: int, offset: int, scope_share: float = 1.0
) -> SearchResult:
    """Rank every in-scope matching document and return one page (`best_chunks` picks snippets).

    `scope_sql` selects the ids of documents the actor may see under the request's filters;
    `scope_share` estimates what fraction of the workspace that is (PostgreSQL plans phrases by it).
    """
    if connection.vendor == "postgresql":
        return pg_run_search(
            query=query,
            scope_sql=scope_sql,
            scope_params=scope_params,
            limit=limit,
            offset=offset,
            broad=scope_share >= PHRASE_FIRST_SHARE,
        )
    clauses, excluded = query.clauses, query.excluded
    indexed = _with_proximity(clauses, query.relaxed)
    if not clauses:
        return SearchResult(total=0, ranked=[], relaxed=query.relaxed)
    hits_sql, hits_params = _union(indexed)
    required = 1 if query.relaxed else len(clauses)
    per_clause = "SELECT document_id, clause, MAX(score) AS score FROM hits GROUP BY document_id, clause"
    exclusion, excluded_params = "", []
    if excluded:
        excluded_sql, excluded_params = _union(list(enumerate(excluded)))
        exclusion = f"AND document_id NOT IN (SELECT document_id FROM ({excluded_sql}) excluded_hits)"
    base = f"""
        WITH scope AS ({scope_sql}),
        hits AS ({hits_sql}),
        per_clause AS ({per_clause}),
        per_doc AS (
            SELECT document_id,
                   SUM(CASE WHEN clause >= 0 THEN 1 ELSE 0 END) AS coverage,
                   SUM(CASE WHEN clause >= 0 THEN score ELSE 2 * score END) AS score
            FROM per_clause GROUP BY document_id
        ),
        ranked AS (SELECT * FROM per_doc WHERE coverage >= %s {exclusion})
    """
    params = [*scope_params, *hits_params, required, *excluded_params]
    with connection.cursor() as cursor:
        cursor.execute(
            base + " SELECT document_id, coverage, score, COUNT(*) OVER () FROM ranked "
            "ORDER BY coverage DESC, score DESC, document_id LIMIT %s OFFSET %s",
            [*params, limit, offset],
        )
        rows = cursor.fetchall()
        if rows:
            total = rows[0][3]
        else:
            cursor.execute(base + " SELECT COUNT(*) FROM ranked", params)
            total = cursor.fetchone()[0]
    ranked = [RankedDocument(document_id=UUID(str(r[0])), coverage=int(r[1]), score=float(r[2])) for r in rows]
    return SearchResult(total=total, ranked=ranked, relaxed=query.relaxed, indexed=indexed)


def _best_chunks(indexed: list[tuple[int, Clause]], document_ids: list[Any]) -> dict[Any, SearchChunk]:
    """For each hit, the body chunk that matches the most clauses (best score on ties).

    Chunks are chosen from the hit rows alone; only the chosen ones are read (a large document
    can match in thousands of chunks).
    """
    ids = [UUID(str(document_id)).hex for document_id in document_ids]
    hits_sql, hits_params = _union(indexed)
    scope = "SELECT id FROM knowledge_document WHERE id IN (" + ", ".join(["%s"] * len(ids)) + ")"
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH scope AS ({scope}) SELECT document_id, chunk_id, ordinal, clause, score FROM ({hits_sql}) h",
            [*ids, *hits_params],
        )
        rows = cursor.fetchall()
    per_chunk: dict[int, tuple[Any, int, set[int], float]] = {}
    for document_id, chunk_id, ordinal, clause, score in rows:
        _, _, seen, total = per_chunk.get(chunk_id, (document_id, ordinal, set(), 0.0))
        seen.add(clause)
        per_chunk[chunk_id] = (document_id, ordinal, seen, total + float(score))
    best: dict[Any, tuple[tuple[int, int, float], int]] = {}
    for chunk_id, (document_id, ordinal, seen, score) in per_chunk.items():
        key = (int(ordinal >= 0), len(seen), score)
        current = best.get(document_id)
        if current is None or key > current[0]:
            best[document_id] = (key, chunk_id)
    chosen = SearchChunk.objects.filter(id__in=[chunk_id for _, chunk_id in best.values()]).only(
        "id", "document_id", "ordinal", "start_line", "end_line", "text"
    )
    return {chunk.document_id: chunk for chunk in chosen}


# --- snippets ------------------------------------------------------------------------------


def _stem(word: str) -> str:
    return word[: max(4, len(word) - 3)] if len(word) > 5 else word


def make_snippet(text: str, start_line: int, words: list[str], max_lines: int) -> dict[str, Any]:
    """The first matching line of a chunk and the lines after it, capped at 1,200 characters."""
    lines = text.split("\n")
    stems = [_stem(w) for w in words if w]
    first = 0
    for i, line in enumerate(lines):
        lowered = line.lower()
        if any(stem in lowered for stem in stems):
            first = i
            break
    selected = lines[first : first + max_lines]
    snippet = "\n".join(selected)
    if first + max_lines < len(lines):
        snippet += "\n…"
    if len(snippet) > SNIPPET_MAX_CHARS:
        snippet = snippet[: SNIPPET_MAX_CHARS - 1] + "…"
    return {
        "text": snippet,
        "start_line": start_line + first,
        "end_line": start_line + first + max(len(selected) - 1, 0),
    }


# --- PostgreSQL ranking over the term table ------------------------------------------------

BM25_K1 = 1.2
BM25_B = 0.75
AVERAGE_LENGTH = 800.0  # `term_length` units (~words); BM25 is insensitive to the exact value at this scale
TITLE_WEIGHT = 8
PROXIMITY_WINDOW = 200  # the top candidates that get the words-side-by-side bonus
BEST_CHUNK_CANDIDATES = 64  # the matching chunks of one hit, in document order, that compete for its snippet
BEST_CHUNK_SCAN_ORDINALS = 128  # first look for them among a document's opening chunks (~250 KB of text)
# A phrase's candidates (readable documents holding all its words) are checked one by one: each
# one's chunks are read until one holds the words in order, about 25 µs a candidate. A GIN pass
# costs the same whatever the scope, because PostgreSQL rechecks every chunk that holds all the
# words anywhere (80 ms for two words found in nine documents of ten); it is taken only when the
# candidates are more than this share of the documents holding the phrase's rarest word.
PHRASE_ONE_PASS_SHARE = 0.2
# A scope of at least this share of the workspace's documents matches phrases GIN pass first.
PHRASE_FIRST_SHARE = 0.5
# `ts_match_vq(v, q)` is `v @@ q` written as a function call, which no index can answer: checked for
# one document, a phrase then reads that document's chunks instead of intersecting the GIN posting
# lists of its words for every candidate (0.5 ms each for common words).
ONE_DOCUMENT_PHRASE = "ts_match_vq(c.search_vector, phraseto_tsquery('english', %s))"
# BM25's document count. From this many documents on, the planner's row estimate (kept current
# by autovacuum's ANALYZE) stands in for counting them: 0.8 ms per search at 10,000 documents.
ESTIMATED_COUNT_FROM = 1000
LIKE_ESCAPE = str.maketrans({"%": r"\%", "_": r"\_", "\\": r"\\"})


# Stems by word, per process: the english configuration does not change while the service runs,
# and a search whose words are all here needs no round trip before its ranking query.
_STEMS: dict[str, tuple[str, ...]] = {}
STEM_CACHE_WORDS = 20_000


def _lexemes(words: list[str]) -> list[list[str]]:
    """PostgreSQL's english stems of each word ([] for stop words)."""
    known = {word: _STEMS.get(word) for word in words}
    missing = [word for word, stems in known.items() if stems is None]
    if missing:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT w.i, t.lexeme FROM unnest(%s::text[]) WITH ORDINALITY AS w(word, i) "
                "CROSS JOIN LATERAL unnest(to_tsvector('english', w.word)) AS t",
                [missing],
            )
            found: dict[int, list[str]] = {}
            for index, lexeme in cursor.fetchall():
                found.setdefault(index - 1, []).append(lexeme)
        fresh = {word: tuple(found.get(i, [])) for i, word in enumerate(missing)}
        known.update(fresh)
        if len(_STEMS) + len(fresh) > STEM_CACHE_WORDS:
            _STEMS.clear()
        _STEMS.update(fresh)
    return [list(known[word] or ()) for word in words]


def _idf_sql(df: str) -> str:
    """BM25's inverse document frequency of a term held by `df` documents.

    An estimated document count below a word's document frequency would make its weight negative.
    Constants are float8: a bare 0.5 is numeric in PostgreSQL, whose arithmetic is several times slower.
    """
    return f"LN(1 + (GREATEST((SELECT docs FROM n), {df}) - {df} + 0.5::float8) / ({df} + 0.5::float8))"


def _saturation_sql(tf: str, length: str) -> str:
    """BM25's term-frequency part, tf (k1 + 1) / (tf + k1 (1 - b + b length / average)), its constants folded."""
    return (
        f"{tf} * {BM25_K1 + 1!r}::float8 / "
        f"({tf} + {BM25_K1 * (1 - BM25_B)!r}::float8 + {BM25_K1 * BM25_B / AVERAGE_LENGTH!r}::float8 * {length})"
    )


def _document_count_sql() -> str:
    """SELECT docs: BM25's document count, estimated past ESTIMATED_COUNT_FROM (a small table is counted)."""
    return (
        f"SELECT CASE WHEN c.reltuples >= {int(ESTIMATED_COUNT_FROM)} THEN c.reltuples::float8 "
        "ELSE (SELECT COUNT(*)::float8 FROM knowledge_document) END AS docs "
        "FROM pg_class c WHERE c.oid = 'knowledge_document'::regclass"
    )


def _terms_sql() -> str:
    """SELECT lexeme, df, idf for the query's lexemes (`%s`: their array), counted once per search.

    Computing idf once per lexeme rather than on each matching row takes a third off scoring a
    common word (8,000 rows: 3.0 -> 1.8 ms), and a phrase's words need no sort to be counted apart.
    """
    return (
        f"SELECT lexeme, df, {_idf_sql('df')} AS idf FROM (SELECT lexeme, COUNT(*)::float8 AS df "
        "FROM knowledge_searchterm WHERE lexeme = ANY(%s) GROUP BY lexeme) c"
    )


# A term's frequency in a document: title words count TITLE_WEIGHT times.
_TF = f"(s.body_tf + {TITLE_WEIGHT} * s.title_tf)::float8"
# The BM25 weight of one term row `s` whose term's idf is `i.idf`.
_ROW_SCORE = f"i.idf * {_saturation_sql(_TF, 's.doc_length')}"


def _in_scope(scoped: bool, alias: str = "s") -> str:
    """The scope filter on a term's rows, unless `pg_run_search` applies it once, later."""
    return f"{alias}.document_id IN (SELECT id FROM scope)" if scoped else "TRUE"


def _pg_term_select(
    term: Term, stems: dict[str, list[str]], broad: bool, scoped: bool = True
) -> tuple[str, list[Any]] | None:
    """SELECT document_id, score for one term (word, prefix or phrase); None if it cannot match.

    `broad`: the scope holds most of the workspace, so a phrase is matched through the GIN index
    first and only its documents' term rows are read. Idf comes from the `terms` CTE.
    """
    if term.prefix:
        prefix = "".join(term.words).translate(LIKE_ESCAPE) if len(term.words) == 1 else None
        if prefix is None:  # a prefix phrase ("foo-ba*"): match the phrase through the chunks
            return None
        # The words a prefix stands for count as one term: their frequencies add up in each
        # document, and its document frequency is the number of documents holding any of them
        # (admin, "grin*" in 8,400 documents: 23 -> 16 ms).
        rows = (
            f"SELECT s.document_id, SUM({_TF}) AS tf, MIN(s.doc_length) AS doc_length, COUNT(*) OVER ()::float8 AS df "
            "FROM knowledge_searchterm s WHERE s.lexeme LIKE %s GROUP BY s.document_id"
        )
        score = f"{_idf_sql('t.df')} * {_saturation_sql('t.tf', 't.doc_length')}"
        return f"SELECT t.document_id, {score} AS score FROM ({rows}) t WHERE {_in_scope(scoped, 't')}", [prefix + "%"]
    if term.is_phrase and term.token and len(stems.get(term.token, [])) == 1:
        whole = stems[term.token][0]
        if whole not in {lex for word in term.words for lex in stems.get(word, [])}:
            phrase = _pg_term_select(Term(term.words), stems, broad, scoped)
            single = _pg_term_select(Term((term.token,)), stems, broad, scoped)
            parts = [part for part in (phrase, single) if part]
            return (
                "SELECT document_id, MAX(score) AS score FROM ("
                + " UNION ALL ".join(sql for sql, _ in parts)
                + ") token_alternatives GROUP BY document_id",
                [p for _, params in parts for p in params],
            )
    lexemes = sorted({lex for word in term.words for lex in stems.get(word, [])})
    if not lexemes:
        return None
    in_scope = _in_scope(scoped)
    rows = "FROM knowledge_searchterm s JOIN terms i ON i.lexeme = s.lexeme WHERE s.lexeme = ANY(%s)"
    grouped = f"{rows} AND {in_scope} GROUP BY s.document_id"
    # A phrase whose other words are stop words ("naxmorkem before") is that one word.
    if not term.is_phrase or (len(lexemes) == 1 and sum(bool(stems.get(word)) for word in term.words) == 1):
        if len(lexemes) == 1:
            # A document has one row per lexeme: nothing to add up, and the idf is looked up once.
            return (
                f"SELECT s.document_id, (SELECT idf FROM terms WHERE lexeme = %s) * "
                f"{_saturation_sql(_TF, 's.doc_length')} AS score "
                f"FROM knowledge_searchterm s WHERE s.lexeme = %s AND {in_scope}",
                [lexemes[0], lexemes[0]],
            )
        return f"SELECT s.document_id, SUM({_ROW_SCORE}) AS score {grouped}", [lexemes]
    phrase = " ".join(term.words)
    if broad:
        # Nearly every document holding all the words is a candidate, so the GIN pass would run
        # anyway: run it first and read term rows for its documents alone (admin, "zenlo archive":
        # 24 ms -> 17 ms).
        return (
            f"SELECT s.document_id, SUM({_ROW_SCORE}) AS score {rows} AND {in_scope} AND s.document_id IN "
            "(SELECT c.document_id FROM knowledge_searchchunk c "
            "WHERE c.search_vector @@ phraseto_tsquery('english', %s)) GROUP BY s.document_id HAVING COUNT(*) = %s",
            [lexemes, phrase, len(lexemes)],
        )
    # The candidates hold every word (a document has one row per lexeme, so COUNT(*) counts its
    # words); only the chunks know which hold them in order. `rarest` is the document frequency of
    # the rarest word. CASE runs the GIN pass lazily, at most once, and IN makes it a hashed
    # subplan rather than an array searched once per candidate.
    return (
        "SELECT document_id, score FROM (SELECT s.document_id, COUNT(*) OVER () AS candidates, "
        f"MIN(i.df) AS rarest, SUM({_ROW_SCORE}) AS score {grouped} HAVING COUNT(*) = %s) p "
        "WHERE CASE WHEN p.candidates > %s * p.rarest "
        "THEN p.document_id IN (SELECT c.document_id FROM knowledge_searchchunk c "
        "WHERE c.search_vector @@ phraseto_tsquery('english', %s)) "
        f"ELSE EXISTS (SELECT 1 FROM knowledge_searchchunk c WHERE c.document_id = p.document_id "
        f"AND {ONE_DOCUMENT_PHRASE}) END",
        [lexemes, len(lexemes), PHRASE_ONE_PASS_SHARE, phrase, phrase],
    )


def _pg_clause_select(
    clause: Clause, index: int, stems: dict[str, list[str]], broad: bool, scoped: bool = True
) -> tuple[str, list[Any]] | None:
    parts = [part for part in (_pg_term_select(term, stems, broad, scoped) for term in clause.alternatives) if part]
    if not parts:
        return None
    if len(parts) == 1:  # a term's select already has one row per document
        sql, params = parts[0]
        return f"SELECT document_id, {index} AS clause, score FROM ({sql}) alt_{index}", params
    union = " UNION ALL ".join(sql for sql, _ in parts)
    params = [p for _, clause_params in parts for p in clause_params]
    return (
        f"SELECT document_id, {index} AS clause, MAX(score) AS score FROM ({union}) alt_{index} GROUP BY document_id",
        params,
    )


def pg_run_search(
    *, query: ParsedQuery, scope_sql: str, scope_params: list[Any], limit: int, offset: int, broad: bool
) -> SearchResult:
    """BM25 over every in-scope match via index-only scans of the term table."""
    words = sorted(
        {w for c in query.clauses + query.excluded for t in c.alternatives for w in (*t.words, t.token) if w}
    )
    stems = dict(zip(words, _lexemes(words), strict=True))
    all_lexemes = sorted({lexeme for lexemes in stems.values() for lexeme in lexemes})
    # A broad scope is applied once, to the documents the clauses add up to, when there is adding
    # up to do (several clauses, or a prefix's many words): filtering every term row first cost
    # more (admin, two mid-frequency words: 6.0 -> 4.1 ms; a prefix: 18.8 -> 17.3 ms). A narrow
    # scope filters term rows first, which cuts them down before anything is added up.
    late_scope = broad and (len(query.clauses) >= 2 or any(t.prefix for c in query.clauses for t in c.alternatives))
    selects: list[tuple[str, list[Any]]] = []
    matchable: list[Clause] = []
    for index, clause in enumerate(query.clauses):
        part = _pg_clause_select(clause, index, stems, broad, not late_scope)
        if part:
            selects.append(part)
            matchable.append(clause)
    if not selects:
        return SearchResult(total=0, ranked=[], relaxed=query.relaxed)
    required = 1 if query.relaxed else len(selects)
    excluded = [part for i, c in enumerate(query.excluded) if (part := _pg_clause_select(c, 1000 + i, stems, broad))]
    clause_sql = " UNION ALL ".join(sql for sql, _ in selects)
    clause_params = [p for _, params in selects for p in params]
    exclusion, exclusion_params = "", []
    if excluded:
        exclusion = (
            "AND document_id NOT IN (SELECT document_id FROM ("
            + " UNION ALL ".join(sql for sql, _ in excluded)
            + ") excluded_hits)"
        )
        exclusion_params = [p for _, params in excluded for p in params]
    # One clause: every matching document covers it once, so there is nothing to add up.
    per_doc = (
        "SELECT document_id, 1 AS coverage, score FROM per_clause"
        if len(selects) == 1
        else "SELECT document_id, COUNT(*) AS coverage, SUM(score) AS score FROM per_clause GROUP BY document_id"
    )
    # IS TRUE keeps the filter a hashed subplan over the scope. As a plain IN, PostgreSQL joins it
    # and, with no statistics for the documents the clauses add up to, guesses a few dozen and
    # probes the documents' primary key once per match (admin question, 6,000 matches: 15 -> 10 ms).
    in_scope = "AND (document_id IN (SELECT id FROM scope)) IS TRUE" if late_scope else ""
    base = f"""
        WITH scope AS ({scope_sql}),
        n AS MATERIALIZED ({_document_count_sql()}),
        terms AS MATERIALIZED ({_terms_sql()}),
        per_clause AS ({clause_sql}),
        per_doc AS ({per_doc}),
        ranked AS (SELECT * FROM per_doc WHERE coverage >= %s {in_scope} {exclusion})
    """
    params = [*scope_params, all_lexemes, *clause_params, required, *exclusion_params]
    # The page comes from the first `offset + limit` rows in rank order, which a top-N sort finds
    # without ordering every match (8,000 for a very common word); the count comes along.
    top = (
        "SELECT document_id, coverage, score, COUNT(*) OVER () AS total FROM ranked "
        "ORDER BY coverage DESC, score DESC, document_id LIMIT %s"
    )
    if query.relaxed and len(query.clauses) >= 2:
        # Among the first PROXIMITY_WINDOW, documents holding every word side by side move up
        # within their coverage. Rows below the window keep their order, so the window (or the
        # page, when it reaches further) is all the query has to sort.
        phrase = " ".join(w for c in query.clauses for w in c.alternatives[0].words)
        statement = f"""{base} SELECT document_id, coverage, score, total FROM (
                SELECT *, CASE WHEN rank_no <= %s AND coverage = %s AND EXISTS (
                    SELECT 1 FROM knowledge_searchchunk c WHERE c.document_id = r.document_id
                    AND c.search_vector @@ phraseto_tsquery('english', %s)) THEN 1 ELSE 0 END AS together
                FROM (
                    SELECT *, ROW_NUMBER() OVER (ORDER BY coverage DESC, score DESC, document_id) AS rank_no
                    FROM ({top}) t
                ) r
            ) b ORDER BY coverage DESC, together DESC, CASE WHEN together = 1 THEN score ELSE 0 END DESC,
              rank_no LIMIT %s OFFSET %s"""
        window = max(PROXIMITY_WINDOW, offset + limit)
        statement_params = [*params, PROXIMITY_WINDOW, len(selects), phrase, window, limit, offset]
    else:
        statement = f"{base} SELECT document_id, coverage, score, total FROM ({top}) t LIMIT %s OFFSET %s"
        statement_params = [*params, offset + limit, limit, offset]
    with connection.cursor() as cursor:
        cursor.execute(statement, statement_params)
        rows = cursor.fetchall()
        if rows:
            total = rows[0][3]
        else:
            cursor.execute(base + " SELECT COUNT(*) FROM ranked", params)
            total = cursor.fetchone()[0]
    ranked = [RankedDocument(document_id=UUID(str(r[0])), coverage=int(r[1]), score=float(r[2])) for r in rows]
    return SearchResult(
        total=total, ranked=ranked, relaxed=query.relaxed, indexed=_with_proximity(matchable, query.relaxed)
    )


def _pg_best_chunks(indexed: list[tuple[int, Clause]], document_ids: list[Any]) -> dict[Any, SearchChunk]:
    """For each hit, the body chunk that matches the most clauses (best rank on ties), among its
    first matching chunks: a large document can match in thousands of chunks.

    The first pass looks only at the opening chunks of each document, so a hit with thousands of
    chunks costs no more than a small one; the few hits that match only further down get a second.
    """
    ids = list(document_ids)
    best = _pg_first_matching_chunks(indexed, ids, below_ordinal=BEST_CHUNK_SCAN_ORDINALS)
    missing = [document_id for document_id in ids if document_id not in best]
    if missing:
        best.update(_pg_first_matching_chunks(indexed, missing, below_ordinal=None))
    return best


def _pg_first_matching_chunks(
    indexed: list[tuple[int, Clause]], ids: list[Any], *, below_ordinal: int | None
) -> dict[Any, SearchChunk]:
    # The queries are written out where they are used: as constants the planner can weigh a rare
    # word (through the GIN index) against a common one (this document's chunks in order).
    queries = [_pg_clause(clause) for _, clause in indexed]
    any_clause = " || ".join(sql for sql, _ in queries)
    any_params = [p for _, params in queries for p in params]
    coverage = " + ".join(f"(h.search_vector @@ {sql})::int" for sql, _ in queries)
    if below_ordinal is None:
        # The few hits that match only far down: their matching chunks straight from the GIN index.
        candidates = f"""SELECT c.id, c.document_id, c.ordinal, c.start_line, c.end_line, c.text, c.search_vector
            FROM knowledge_searchchunk c WHERE c.document_id = ANY(%s) AND c.search_vector @@ ({any_clause})"""
        candidate_params = [ids, *any_params]
    else:
        candidates = f"""SELECT c.id, c.document_id, c.ordinal, c.start_line, c.end_line, c.text, c.search_vector
            FROM unnest(%s::uuid[]) AS d(id) CROSS JOIN LATERAL (
                SELECT * FROM knowledge_searchchunk c
                WHERE c.document_id = d.id AND c.ordinal < %s AND c.search_vector @@ ({any_clause})
                ORDER BY c.ordinal LIMIT %s
            ) c"""
        candidate_params = [ids, below_ordinal, *any_params, BEST_CHUNK_CANDIDATES]
    chunks = SearchChunk.objects.raw(
        f"""SELECT DISTINCT ON (h.document_id) h.id, h.document_id, h.ordinal, h.start_line, h.end_line, h.text
        FROM ({candidates}) h
        ORDER BY h.document_id, h.ordinal >= 0 DESC, {coverage} DESC, ts_rank(h.search_vector, {any_clause}) DESC,
            h.ordinal""",
        [*candidate_params, *any_params, *any_params],
    )
    return {chunk.document_id: chunk for chunk in chunks}
