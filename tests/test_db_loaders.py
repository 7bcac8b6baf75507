"""config.db_loaders: PostgreSQL timestamptz values read with the C parser, exactly as Django reads them."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.db.backends.postgresql.psycopg_any import BaseTzLoader
from psycopg.pq import Format

from config import db_loaders
from workspaces.models import Workspace

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="psycopg's timestamptz loaders"),
]

VALUES = [
    "2026-12-07 18:01:02.123456+00",
    "2026-03-29 01:30:00+01",
    "1999-12-31 23:59:59.5-09:30",
    "0001-01-01 00:00:00+00",
    "9999-12-31 23:59:59.999999+00",
]


def _read(sql_values: list[str]) -> list[dt.datetime]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT v::timestamptz FROM unnest(%s::text[]) AS v", [sql_values])
        return [row[0] for row in cursor.fetchall()]


def test_connections_read_timestamptz_with_the_c_loader_and_django_keeps_it():
    connection.ensure_connection()
    with connection.cursor():  # Django re-registers its own loader here if the zones disagree
        loader = connection.connection.adapters.get_loader(1184, Format.TEXT)
    assert loader is db_loaders.timestamptz_loader(connection.timezone)
    assert loader.timezone == connection.timezone


def test_values_equal_what_djangos_loader_gives():
    ours = _read(VALUES)
    assert all(value.tzinfo is dt.UTC for value in ours)

    class DjangoLoader(BaseTzLoader):
        timezone = connection.timezone

    connection.connection.adapters.register_loader("timestamptz", DjangoLoader)
    try:
        theirs = _read(VALUES)
    finally:
        connection.connection.adapters.register_loader(
            "timestamptz", db_loaders.timestamptz_loader(connection.timezone)
        )
    assert ours == theirs
    assert [value.tzinfo for value in ours] == [value.tzinfo for value in theirs]
    assert ours[0] == dt.datetime(2026, 12, 7, 18, 1, 2, 123456, tzinfo=dt.UTC)
    assert ours[2] == dt.datetime(2000, 1, 1, 9, 29, 59, 500000, tzinfo=dt.UTC)


def test_model_timestamps_round_trip():
    workspace = Workspace.objects.create(slug="clock", name="Clock")
    fresh = Workspace.objects.get(pk=workspace.pk)
    assert fresh.created_at == workspace.created_at and fresh.created_at.tzinfo is dt.UTC
