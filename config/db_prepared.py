"""PostgreSQL: lookups that every request runs, planned once per connection.

Django binds parameters on the client and leaves prepared statements off, so PostgreSQL parses
and plans each statement again on every request. For a lookup by key that is most of its cost:
a search's page of 20 documents takes 0.6 ms to plan and 0.2 ms to run. `prepared_cursor()`
binds on the server, and with the connection's `prepare_threshold` at 0 (settings.tune_postgres)
psycopg prepares each of its statements the first time a connection runs it; after a few runs
PostgreSQL settles on a generic plan and stops planning it. Django's own cursor binds on the
client, which never prepares.

Only for statements whose best plan does not depend on the values: a search, whose plan does,
keeps Django's cursor. Django wraps this cursor as its own, so execute wrappers, query logging
and query counts see these statements too. `PG_PREPARED_LOOKUPS=false` turns it off, for
poolers that cannot carry prepared statements across transactions (PgBouncer before 1.21 in
transaction mode); other databases always get Django's cursor.

A prepared statement outlives a migration that changes the type of a column it returns: such a
connection fails until CONN_MAX_AGE closes it, so restart web processes after migrating.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.backends.utils import CursorWrapper


@contextmanager
def prepared_cursor() -> Iterator[CursorWrapper]:
    """A cursor whose statements PostgreSQL keeps prepared on this connection (else Django's own)."""
    if connection.vendor != "postgresql" or not settings.PG_PREPARED_LOOKUPS:
        with connection.cursor() as cursor:
            yield cursor
        return
    # What Django's own cursor() does first: health check, connect, then wrap the cursor.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    from django.db.backends.postgresql.base import ServerBindingCursor

    with connection.wrap_database_errors:
        raw = ServerBindingCursor(connection.connection)
    wrapped = _logged_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)
    with wrapped as cursor:
        yield cursor


def _logged_cursor(raw: Any) -> CursorWrapper:
    return _logged_cursor_class()(raw, connection)


@cache
def _logged_cursor_class() -> type[CursorWrapper]:
    """Django's debug cursor, logging the statement with its values bound.

    Django reads the logged SQL back from the cursor the way client binding leaves it, which a
    server-binding cursor does not; composing it here keeps query logs and counts readable.
    """
    from django.db.backends.postgresql.base import CursorDebugWrapper

    class LoggedPreparedCursor(CursorDebugWrapper):
        def execute(self, sql: str, params: Any = None) -> Any:
            with self.debug_sql(self.db.ops.compose_sql(sql, params)):
                return CursorWrapper.execute(self, sql, params)

    return LoggedPreparedCursor
