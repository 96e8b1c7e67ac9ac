"""Counting what a step costs: statements, round trips, durable transactions, client fsyncs.

Counts, not times: they are exact on any machine, so they say what the commit protocol costs
where latencies are noisy. While :meth:`DatabaseCounter.installed` is active, every Django
database connection of this process -- every alias (the main database and the high-water mark
store, DESIGN.md section 4.2) and every thread (the MCP server runs its calls in worker threads)
-- is counted, and so is every ``os.fsync`` / ``os.fdatasync`` this process makes:

* **statements**: every SQL statement sent through Django's cursors (including ``BEGIN`` on
  SQLite, savepoints and their releases);
* **round trips**: statements, plus every ``COMMIT`` / ``ROLLBACK`` that ended an open
  transaction, plus on PostgreSQL the ``BEGIN`` psycopg sends before a transaction's first
  statement (SQLite has no network: there a "round trip" is one call into the library);
* **durable transactions**: transactions that wrote and committed (each one an fsync on both
  engines), counting a write in autocommit mode as one. Read-only commits are not durable work;
* **client fsyncs**: ``os.fsync`` and ``os.fdatasync`` calls of this process (an adapter's files
  and journal). The database's own fsyncs (SQLite's inside the library, PostgreSQL's in the
  server) are not among them: the durable transactions count those; neither are fsyncs of child
  processes (git's).

Statements sent around Django's cursors (a raw driver connection) are not seen; Ratchet's code
goes through Django's cursors.
"""

from __future__ import annotations

import os
import statistics
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper

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
    fsyncs: int = 0

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
    """Counts statements, round trips, durable transactions and client fsyncs while installed.

    Use :meth:`installed` as a context manager around the work; :attr:`counts` is live, and
    :meth:`snapshot` copies it (subtract two with :meth:`DatabaseCounts.minus`). One counter at
    a time: it patches Django's cursor and connection classes and ``os.fsync`` for the process.
    """

    def __init__(self) -> None:
        self.counts = DatabaseCounts()
        # Keyed by the connection object: one alias has one connection per thread.
        self._open: dict[int, bool] = {}
        self._wrote: dict[int, bool] = {}
        self._lock = threading.Lock()

    def snapshot(self) -> DatabaseCounts:
        """A copy of the counts so far."""
        with self._lock:
            return DatabaseCounts(**{f.name: getattr(self.counts, f.name)
                                     for f in fields(self.counts)})

    def _execute(self, execute: Callable[..., Any], sql: str, params: Any, many: bool,
                 context: dict[str, Any]) -> Any:
        conn = context["connection"]
        key = id(conn)
        head = sql.lstrip().upper()
        with self._lock:
            counts = self.counts
            counts.statements += 1
            counts.round_trips += 1
            if head.startswith(("BEGIN", "START TRANSACTION")):
                self._open[key], self._wrote[key] = True, False
            elif not conn.get_autocommit() and not self._open.get(key):
                # psycopg starts the transaction with its own BEGIN before this statement.
                self._open[key], self._wrote[key] = True, False
                if conn.vendor == "postgresql":
                    counts.round_trips += 1
            if _is_write(sql):
                if self._open.get(key):
                    self._wrote[key] = True
                else:
                    counts.durable_transactions += 1  # autocommit: the statement is a transaction
        return execute(sql, params, many, context)

    def _ended(self, conn: Any, *, commit: bool) -> None:
        key = id(conn)
        with self._lock:
            if self._open.get(key):
                self.counts.round_trips += 1
                if commit:
                    self.counts.commits += 1
                    if self._wrote.get(key):
                        self.counts.durable_transactions += 1
            self._open[key], self._wrote[key] = False, False

    def _fsynced(self) -> None:
        with self._lock:
            self.counts.fsyncs += 1

    @contextmanager
    def installed(self) -> Iterator[DatabaseCounter]:
        """Count every database connection and every fsync of this process until the block ends."""
        counter = self
        execute_with_wrappers = CursorWrapper._execute_with_wrappers
        commit, rollback = BaseDatabaseWrapper._commit, BaseDatabaseWrapper._rollback
        fsync, fdatasync = os.fsync, os.fdatasync

        def counted_execute(cursor: Any, sql: str, params: Any, many: bool,
                            executor: Callable[..., Any]) -> Any:
            def inner(sql: str, params: Any, many: bool, _context: Any) -> Any:
                return execute_with_wrappers(cursor, sql, params, many, executor)
            return counter._execute(inner, sql, params, many, {"connection": cursor.db})

        def counted_commit(conn: Any) -> Any:
            counter._ended(conn, commit=True)
            return commit(conn)

        def counted_rollback(conn: Any) -> Any:
            counter._ended(conn, commit=False)
            return rollback(conn)

        def counted_fsync(fd: Any) -> None:
            counter._fsynced()
            fsync(fd)

        def counted_fdatasync(fd: Any) -> None:
            counter._fsynced()
            fdatasync(fd)

        CursorWrapper._execute_with_wrappers = counted_execute  # type: ignore[method-assign]
        BaseDatabaseWrapper._commit = counted_commit  # type: ignore[method-assign]
        BaseDatabaseWrapper._rollback = counted_rollback  # type: ignore[method-assign]
        os.fsync, os.fdatasync = counted_fsync, counted_fdatasync
        try:
            yield self
        finally:
            CursorWrapper._execute_with_wrappers = execute_with_wrappers  # type: ignore[method-assign]
            BaseDatabaseWrapper._commit = commit  # type: ignore[method-assign]
            BaseDatabaseWrapper._rollback = rollback  # type: ignore[method-assign]
            os.fsync, os.fdatasync = fsync, fdatasync


def count_of(name: str, label: str, units: list[DatabaseCounts], *,
             fsyncs: bool = False) -> Count:
    """A :class:`runtime.bench.report.Count`: the median of each count over ``units`` (>= 1);
    with ``fsyncs`` also the client fsyncs (left out where a child process does the file work,
    such as git's, and they would read as zero)."""
    return Count(name=name, label=label, units=len(units),
                 statements=statistics.median(u.statements for u in units),
                 round_trips=statistics.median(u.round_trips for u in units),
                 durable_transactions=statistics.median(u.durable_transactions for u in units),
                 fsyncs=statistics.median(u.fsyncs for u in units) if fsyncs else None)
