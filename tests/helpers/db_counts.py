"""Count statements and durable transactions on the default database (DESIGN.md section 4.3).

A durable transaction is a COMMIT Django sends (``connection.commit`` at the end of an outermost
``atomic`` block) or a write statement run in autocommit mode (outside any ``atomic`` block:
each is its own transaction). Counts are exact and load-independent, so tests assert them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


@dataclass
class DbCounts:
    """What ran inside :func:`db_counting`: ``statements`` (every SQL statement sent, including
    savepoints), ``transactions`` (durable commits) and the SQL text of each statement."""

    statements: int = 0
    transactions: int = 0
    sql: list[str] = field(default_factory=list)


@contextmanager
def db_counting() -> Iterator[DbCounts]:
    """Count statements and durable transactions on ``connection`` while the block runs."""
    counts = DbCounts()
    original = connection._commit

    def counted_commit() -> Any:
        counts.transactions += 1
        return original()

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        counts.statements += 1
        counts.sql.append(sql)
        if not connection.in_atomic_block and sql.lstrip().upper().startswith(_WRITES):
            counts.transactions += 1  # autocommit: the statement is its own transaction
        return execute(sql, params, many, context)

    connection._commit = counted_commit
    try:
        with connection.execute_wrapper(wrapper):
            yield counts
    finally:
        del connection._commit  # back to the class's method
