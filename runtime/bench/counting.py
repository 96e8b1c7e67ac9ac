"""Counting what a step costs the database: statements, round trips, durable transactions.

Counts, not times: they are exact on any machine, so they say what the commit protocol costs
where latencies are noisy. :class:`DatabaseCounter` installs Django's ``execute_wrapper`` on
every connection of this thread and wraps each connection's commit and rollback:

* **statements**: every SQL statement sent through Django's cursors (including ``BEGIN`` on
  SQLite, savepoints and their releases);
* **round trips**: statements, plus every ``COMMIT`` / ``ROLLBACK`` that ended an open
  transaction, plus on PostgreSQL the ``BEGIN`` psycopg sends before a transaction's first
  statement (SQLite has no network: there a "round trip" is one call into the library);
* **durable transactions**: transactions that wrote and committed (each one an fsync on both
  engines), counting a write in autocommit mode as one. Read-only commits are not durable work.

Statements sent around Django's cursors (a raw driver connection) are not seen; Ratchet's code
goes through Django's cursors.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, fields
from typing import Any

from django.db import connections

from runtime.bench.report import Count

_READ_PREFIXES = ("SELECT", "PRAGMA", "SHOW", "SET ", "EXPLAIN", "VALUES")
_CONTROL_PREFIXES = ("BEGIN", "SAVEPOINT", "RELEASE", "ROLLBACK", "COMMIT", "START TRANSACTION")


@dataclass
class DatabaseCounts:
    """Counts over some stretch of work (see the module docstring for what each means)."""

    statements: int = 0
    round_trips: int = 0
    commits: int = 0
    durable_transactions: int = 0

    def minus(self, earlier: DatabaseCounts) -> DatabaseCounts:
        """The counts since ``earlier`` (a :meth:`DatabaseCounter.snapshot`)."""
        return DatabaseCounts(**{f.name: getattr(self, f.name) - getattr(earlier, f.name)
                                 for f in fields(self)})


def _is_write(sql: str) -> bool:
    head = sql.lstrip().upper()
    if head.startswith(_CONTROL_PREFIXES):
        return False
    if head.startswith("WITH"):
        return any(word in head for word in ("INSERT", "UPDATE", "DELETE"))
    return not head.startswith(_READ_PREFIXES)


class DatabaseCounter:
    """Counts statements, round trips and durable transactions while installed.

    Use :meth:`installed` as a context manager around the work; :attr:`counts` is live, and
    :meth:`snapshot` copies it (subtract two with :meth:`DatabaseCounts.minus`).
    """

    def __init__(self) -> None:
        self.counts = DatabaseCounts()
        self._open: dict[str, bool] = {}
        self._wrote: dict[str, bool] = {}

    def snapshot(self) -> DatabaseCounts:
        """A copy of the counts so far."""
        return DatabaseCounts(**{f.name: getattr(self.counts, f.name) for f in fields(self.counts)})

    def _execute(self, execute: Callable[..., Any], sql: str, params: Any, many: bool,
                 context: dict[str, Any]) -> Any:
        conn = context["connection"]
        alias = conn.alias
        head = sql.lstrip().upper()
        counts = self.counts
        counts.statements += 1
        counts.round_trips += 1
        if head.startswith(("BEGIN", "START TRANSACTION")):
            self._open[alias], self._wrote[alias] = True, False
        elif not conn.get_autocommit() and not self._open.get(alias):
            # psycopg starts the transaction with its own BEGIN before this statement.
            self._open[alias], self._wrote[alias] = True, False
            if conn.vendor == "postgresql":
                counts.round_trips += 1
        if _is_write(sql):
            if self._open.get(alias):
                self._wrote[alias] = True
            else:
                counts.durable_transactions += 1  # autocommit: the statement is a transaction
        return execute(sql, params, many, context)

    def _ending(self, conn: Any, original: Callable[[], None], *, commit: bool) -> Callable[[], None]:
        def end() -> None:
            alias = conn.alias
            if self._open.get(alias):
                self.counts.round_trips += 1
                if commit:
                    self.counts.commits += 1
                    if self._wrote.get(alias):
                        self.counts.durable_transactions += 1
            self._open[alias], self._wrote[alias] = False, False
            original()
        return end

    @contextmanager
    def installed(self) -> Iterator[DatabaseCounter]:
        """Count on every database connection of this thread until the block ends."""
        with ExitStack() as stack:
            for conn in connections.all():
                stack.enter_context(conn.execute_wrapper(self._execute))
                commit, rollback = conn._commit, conn._rollback
                conn._commit = self._ending(conn, commit, commit=True)
                conn._rollback = self._ending(conn, rollback, commit=False)

                def restore(conn: Any = conn, commit: Any = commit, rollback: Any = rollback) -> None:
                    conn._commit, conn._rollback = commit, rollback
                stack.callback(restore)
            yield self


def count_of(name: str, label: str, units: list[DatabaseCounts]) -> Count:
    """A :class:`runtime.bench.report.Count`: the median of each count over ``units`` (>= 1)."""
    return Count(name=name, label=label, units=len(units),
                 statements=statistics.median(u.statements for u in units),
                 round_trips=statistics.median(u.round_trips for u in units),
                 durable_transactions=statistics.median(u.durable_transactions for u in units))
