"""The embedded database's backend: Django's SQLite backend, keeping each statement's rewritten
placeholders. Statements must run exactly as Django's own cursor would run them."""

from __future__ import annotations

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.sqlite3.base import SQLiteCursorWrapper as DjangoCursor

from deepwork_site.sqlite_backend import base
from workflows.models import Project

pytestmark = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="the embedded database's backend"
)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT %s, %s",
        "SELECT '100%%', %s",
        "SELECT '%%s' || %s",
        "UPDATE t SET a = %s WHERE b LIKE '%%x%%' AND c = %s",
        "SELECT 1",
    ],
)
def test_a_statement_is_rewritten_as_djangos_cursor_rewrites_it(query):
    assert base.qmark_style(query) == DjangoCursor.convert_query(None, query)  # type: ignore[arg-type]


def test_named_parameters_are_left_to_django():
    cursor = base.SQLiteCursorWrapper.__new__(base.SQLiteCursorWrapper)
    assert cursor.convert_query("SELECT %(a)s", param_names=["a"]) == "SELECT :a"


@pytest.mark.django_db
def test_the_embedded_database_runs_on_it_and_reuses_each_rewritten_statement():
    assert isinstance(connections[DEFAULT_DB_ALIAS], base.DatabaseWrapper)
    with connection.cursor() as cursor:
        assert isinstance(cursor.cursor, base.SQLiteCursorWrapper)
    sql = "SELECT %s + %s, '50%%'"
    with connection.cursor() as cursor:
        cursor.execute(sql, [1, 2])
        assert cursor.fetchone() == (3, "50%")
        before = base.qmark_style.cache_info()
        cursor.execute(sql, [3, 4])
        assert cursor.fetchone() == (7, "50%")
    after = base.qmark_style.cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (1, 0)
    # The ORM's statements go through it too.
    Project.objects.filter(pk=-1).exists()
    assert base.qmark_style.cache_info().misses + base.qmark_style.cache_info().hits > after.hits
