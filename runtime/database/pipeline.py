"""Sending a transaction's statements together, in one round trip, on PostgreSQL (DESIGN.md
section 4.13).

psycopg 3's pipeline mode queues the statements (the ``BEGIN`` it opens the transaction with
among them) and sends them at once; the server answers all of them after one Sync. The commit
protocol's main transaction is a fixed run of writes whose results it only needs at the end (the
fence UPDATE's rowcount), so it sends them this way: one round trip, then ``COMMIT``. SQLite has
no network, so there every statement is one call into the library and nothing is batched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from django.db import DatabaseError, connections


@contextmanager
def pipelined(alias: str) -> Iterator[bool]:
    """Batch the statements run on ``alias`` inside the block; yields whether it does.

    On PostgreSQL with a libpq that supports pipeline mode, statements run through Django's
    cursors in the block are sent without waiting for their results; leaving the block sends
    the Sync and waits for all of them (one round trip), so a cursor's ``rowcount`` is known only
    after the block. A statement that reads rows inside the block (``fetchone``) makes psycopg
    flush and wait there: correct, one round trip more. Elsewhere yields False and the statements
    run one by one as usual.

    Raises:
        DatabaseError (Django's, e.g. IntegrityError): a statement of the batch failed; raised
            when the block ends, and the open transaction must be rolled back.
    """
    connection = connections[alias]
    if connection.vendor != "postgresql" or not psycopg.Pipeline.is_supported():
        yield False
        return
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.connection.pipeline():
        yield True


def batch_rollback(alias: str) -> None:
    """End a batch's transaction that failed, with a ``ROLLBACK`` said in SQL (a warning and
    nothing more when none is open). A connection that cannot even do that is broken, and is
    closed so that Django opens a new one for its next use."""
    connection = connections[alias]
    try:
        with connection.cursor() as cursor:
            cursor.execute("ROLLBACK")
    except DatabaseError:
        connection.close_if_unusable_or_obsolete()
