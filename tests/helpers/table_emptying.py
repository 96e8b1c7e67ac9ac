"""Emptying the test databases after a transactional test, cheaply.

Django's ``TransactionTestCase`` ends each test with ``manage.py flush``: on PostgreSQL one
``TRUNCATE`` of every table (a new file per table, each synced to disk), then the
``post_migrate`` signal re-creates every content type and permission. That costs about 0.3 s
per test, and the suite has hundreds of transactional tests (real child processes must see the
rows, so they cannot run inside a rolled-back transaction).

:func:`tables_empty` leaves the same state with one transaction of ``DELETE`` statements
(the foreign keys Django creates are deferrable, so the order does not matter) and keeps the
content types and permissions, which no test writes and every test reads, instead of deleting
and re-creating them. Nothing here is part of the product: it only decides how the tests clean up.
"""

from __future__ import annotations

from django.db import connections, transaction

KEPT_TABLES = frozenset({"django_content_type", "auth_permission", "django_migrations"})
"""Tables left as they are: rows the migrations and ``post_migrate`` put there, never a test."""

_tables: dict[str, list[str]] = {}


def _tables_of(alias: str) -> list[str]:
    """Django's tables in database ``alias`` minus :data:`KEPT_TABLES` (read from the catalog
    once per alias and test session: migrations ran before the first test)."""
    if alias not in _tables:
        connection = connections[alias]
        names = connection.introspection.django_table_names(only_existing=True, include_views=False)
        _tables[alias] = sorted(set(names) - KEPT_TABLES)
    return _tables[alias]


def tables_empty(*, aliases: list[str]) -> None:
    """Delete every row a test can have written in each database of ``aliases`` (``"default"``,
    ``"hwm"``), one transaction per database.

    On PostgreSQL the transaction defers the foreign keys and does not wait for its commit
    record to reach the disk (``synchronous_commit = off``: the rows are gone for every
    connection at once; only a crash of the server could bring them back, and then the test
    database is dropped anyway).
    """
    for alias in aliases:
        connection = connections[alias]
        tables = _tables_of(alias)
        if not tables:
            continue
        quote = connection.ops.quote_name
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SET LOCAL synchronous_commit = off")
                cursor.execute("SET CONSTRAINTS ALL DEFERRED")
                cursor.execute("; ".join(f"DELETE FROM {quote(name)}" for name in tables))
            else:
                for name in tables:
                    cursor.execute(f"DELETE FROM {quote(name)}")
