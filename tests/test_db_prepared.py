"""config.db_prepared: the lookups every request runs stay prepared on a PostgreSQL connection,
and Django still sees and logs them; elsewhere, or when turned off, Django's cursor runs them."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from config.db_prepared import prepared_cursor
from knowledge import selectors
from knowledge.services import document_create
from workspaces.services import namespace_create

pytestmark = pytest.mark.django_db


def _prepared_statements(fragment: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM pg_prepared_statements WHERE statement LIKE %s", [f"%{fragment}%"])
        return cursor.fetchone()[0]


def _page(make_member):
    member = make_member("member")
    namespace = namespace_create(actor=member.actor, slug="ours")
    document = document_create(actor=member.actor, namespace=namespace, path="a.md", content="# A\n")
    return member, document


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL prepared statements")
def test_a_ranked_page_is_prepared_once_per_connection_and_still_logged(make_member):
    member, document = _page(make_member)
    marker = "unnest"  # only the ranked page's statement selects from unnest(ids)
    before = _prepared_statements(marker)
    with CaptureQueriesContext(connection) as captured:
        for _ in range(3):
            page = selectors.ranked_page(actor=member.actor, document_ids=[document.pk])
    assert list(page) == [document.pk]
    assert _prepared_statements(marker) == before + 1  # prepared on first use, then reused
    logged = [query["sql"] for query in captured.captured_queries if marker in query["sql"]]
    assert len(logged) == 3 and all(document.pk.hex in sql for sql in logged)  # logged with its values


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL prepared statements")
def test_turned_off_the_lookups_run_unprepared(make_member):
    member, document = _page(make_member)
    before = _prepared_statements("unnest")
    with override_settings(PG_PREPARED_LOOKUPS=False):
        assert list(selectors.ranked_page(actor=member.actor, document_ids=[document.pk])) == [document.pk]
    assert _prepared_statements("unnest") == before


def test_any_database_gets_a_working_cursor():
    with prepared_cursor() as cursor:
        cursor.execute("SELECT %s + 1", [41])
        assert cursor.fetchone()[0] == 42
