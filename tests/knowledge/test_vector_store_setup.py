"""Setting up the vector store on PostgreSQL: a database without pgvector, and the per-space index.

pgvector is not a trusted extension, so a role without superuser rights cannot `CREATE EXTENSION
vector`, even in a database it owns and on a server that has pgvector installed. The first test
makes such a role and database on the test server, runs the project's migrations as that role
with `manage.py migrate`, then runs `pgvector_missing_checks.py` in a pytest subprocess whose
DATABASE_URL is the role's, so the whole application (migrations of its test database, live
HTTP server, eager Celery) sees only what that role may do.

The second test is about concurrent chunk syncs in fresh processes: each checks its space's HNSW
index inside a transaction that then writes vectors.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from django.db import connection, connections, transaction
from psycopg import sql
from psycopg.conninfo import make_conninfo

from knowledge.embeddings import store
from tests.knowledge.semantic_helpers import postgres_only

pytestmark = postgres_only
ROOT = Path(__file__).resolve().parents[2]
CHECKS = Path(__file__).with_name("pgvector_missing_checks.py")


def _server() -> dict[str, Any]:
    """libpq parameters of the test server, as Django connects to it."""
    db = connection.settings_dict
    params = {"host": db["HOST"] or None, "port": db["PORT"] or None, "user": db["USER"], "password": db["PASSWORD"]}
    return {k: v for k, v in params.items() if v}


def _url(user: str, password: str, dbname: str) -> str:
    db = connection.settings_dict
    host = db["HOST"] or "localhost"
    host = quote(host, safe="") if host.startswith("/") else host
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgres://{user}:{password}@{host}{port}/{dbname}"


@pytest.fixture
def unprivileged_database():
    """(role, password, database): a login role with CREATEDB but no superuser, owning a fresh database."""
    role = f"kb_novector_{os.getpid()}_{secrets.token_hex(3)}"
    password = secrets.token_urlsafe(12)
    with psycopg.connect(**_server(), dbname="postgres", autocommit=True) as admin:
        superuser = admin.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]
        assert superuser, "this test creates a role and a database, so the test database user must be a superuser"
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN CREATEDB NOSUPERUSER PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(password)
            )
        )
        admin.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(role), sql.Identifier(role)))
    try:
        yield role, password, role
    finally:
        with psycopg.connect(**_server(), dbname="postgres", autocommit=True) as admin:
            for name in (role, f"test_{role}"):  # the subprocess's test database, if it was left behind
                admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def _run(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def test_a_role_that_cannot_create_pgvector_gets_text_search_and_a_reason(unprivileged_database):
    role, password, dbname = unprivileged_database
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DJANGO_SETTINGS_MODULE"))}
    env["DATABASE_URL"] = _url(role, password, dbname)

    migrate = _run(
        [sys.executable, "manage.py", "migrate", "--noinput", "--settings=config.settings.test"], env, timeout=300
    )
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    assert "Applying knowledge.0005_embeddings... OK" in migrate.stdout

    with psycopg.connect(**{**_server(), "user": role, "password": password}, dbname=dbname) as conn:
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0] is False
        assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'").fetchone()[0] == 0
        assert conn.execute("SELECT to_regclass('knowledge_chunkvector')").fetchone()[0] is None
        assert conn.execute("SELECT to_regclass('knowledge_embeddingchunk')").fetchone()[0] is not None
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE EXTENSION vector")

    # The checks need the server's superuser only to play the operator who follows the setup hint.
    admin = _server()
    env["KB_WITHOUT_PGVECTOR"] = "1"
    env["KB_PG_SUPERUSER"] = make_conninfo(**admin)
    checks = _run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", str(CHECKS)], env, timeout=600)
    output = checks.stdout + checks.stderr
    assert checks.returncode == 0, output
    assert " passed" in output and "skipped" not in output and "failed" not in output, output


SPACE = 987_654  # no EmbeddingSpace row is needed: the index and the vector table know only the id


@pytest.mark.django_db(transaction=True)
def test_processes_checking_an_existing_space_index_do_not_deadlock_their_writes(clean_vectors):
    store.ensure_space_index(SPACE, 3)
    both_checked = threading.Barrier(2, timeout=20)
    errors: list[BaseException] = []

    def sync() -> None:
        try:
            with transaction.atomic():
                store._indexed.clear()  # a process that has not seen the index yet
                store.ensure_space_index(SPACE, 3)
                both_checked.wait()
                store.write_vectors(SPACE, [(str(uuid.uuid4()), "h", [1.0, 0.0, 0.0])])
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    try:
        threads = [threading.Thread(target=sync) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {store.TABLE} WHERE space_id = %s", [SPACE])
            assert cursor.fetchone()[0] == 2
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {store.index_name(SPACE)}")
        store._indexed.clear()
