"""Count statements and durable transactions on the main database and on the mark's
(DESIGN.md sections 4.2 and 4.3).

A durable transaction is a COMMIT Django sends (``connection.commit`` at the end of an outermost
``atomic`` block), a ``COMMIT`` statement ending a transaction that wrote and that a ``BEGIN``
statement opened in autocommit mode (the batched commit on PostgreSQL), or any other write
statement run in autocommit mode (outside any ``atomic`` block: each is its own transaction).
Counts are exact and load-independent, so tests assert them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from runtime.database.routers import hwm_alias

_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


@dataclass
class DbCounts:
    """What ran inside :func:`db_counting` on the main database: ``statements`` (every SQL
    statement sent, including savepoints), ``transactions`` (durable commits) and the SQL text of
    each statement; ``mark_transactions``: durable commits on the mark's own database (0 when
    the mark lives in the main one)."""

    statements: int = 0
    transactions: int = 0
    sql: list[str] = field(default_factory=list)
    mark_transactions: int = 0

    @property
    def durable(self) -> int:
        """Durable transactions on both databases."""
        return self.transactions + self.mark_transactions


@contextmanager
def _counted(alias: str, counts: DbCounts, *, main: bool) -> Iterator[None]:
    connection = connections[alias]
    original = connection._commit

    def count_one() -> None:
        if main:
            counts.transactions += 1
        else:
            counts.mark_transactions += 1

    def counted_commit() -> Any:
        count_one()
        return original()

    said = {"open": False, "wrote": False}  # a transaction said in SQL in autocommit mode

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if main:
            counts.statements += 1
            counts.sql.append(sql)
        head = sql.lstrip().upper()
        # Django's own BEGIN (SQLite's, entering ``atomic``) runs with autocommit already off.
        if not connection.in_atomic_block and connection.autocommit:
            if head.startswith("BEGIN"):
                said.update(open=True, wrote=False)
            elif head.startswith(("COMMIT", "ROLLBACK")):
                if head.startswith("COMMIT") and said["open"] and said["wrote"]:
                    count_one()  # the batched commit (runtime/checkpoints/transaction.py)
                said.update(open=False, wrote=False)
            elif head.startswith(_WRITES):
                if said["open"]:
                    said["wrote"] = True
                else:
                    count_one()  # autocommit: the statement is its own transaction
        return execute(sql, params, many, context)

    connection._commit = counted_commit
    try:
        with connection.execute_wrapper(wrapper):
            yield
    finally:
        del connection._commit  # back to the class's method


@contextmanager
def db_counting() -> Iterator[DbCounts]:
    """Count statements and durable transactions on the main database, and durable
    transactions on the mark's, while the block runs."""
    counts = DbCounts()
    with ExitStack() as stack:
        stack.enter_context(_counted(DEFAULT_DB_ALIAS, counts, main=True))
        stack.enter_context(_counted(hwm_alias(), counts, main=False))
        yield counts
