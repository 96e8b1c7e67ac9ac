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
  statement (SQLite has no network: there a "round trip" is one call into the library). A
  statement sent in a batch (psycopg's pipeline mode, ``runtime.database.pipeline``) is no round
  trip of its own: the batch's Sync is one (and a row read inside a batch, which makes psycopg
  ask for results early, is one more);
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

from django.db import DEFAULT_DB_ALIAS
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from psycopg._pipeline_base import BasePipeline

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
    main_durable_transactions: int = 0
    """Of ``durable_transactions``, those on the main database (the ``default`` alias)."""

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


def _in_pipeline(conn: Any) -> bool:
    """Whether ``conn`` (a Django connection) is sending a batch (psycopg's pipeline mode)."""
    raw = getattr(conn, "connection", None)
    pgconn = getattr(raw, "pgconn", None)
    return bool(pgconn is not None and pgconn.pipeline_status)


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
        batched = _in_pipeline(conn)
        with self._lock:
            counts = self.counts
            counts.statements += 1
            if not batched:  # a batched statement travels with the batch's Sync (_synced)
                counts.round_trips += 1
            if head.startswith(("BEGIN", "START TRANSACTION")):
                self._open[key], self._wrote[key] = True, False
            elif head.startswith(("COMMIT", "ROLLBACK")) and conn.get_autocommit():
                # A transaction said in SQL (runtime.checkpoints.transaction's batched commit).
                if head.startswith("COMMIT") and self._open.get(key):
                    counts.commits += 1
                    if self._wrote.get(key):
                        self._durable(conn)
                self._open[key], self._wrote[key] = False, False
            elif not conn.get_autocommit() and not self._open.get(key):
                # psycopg starts the transaction with its own BEGIN before this statement (in
                # a batch too: it waits for that BEGIN with a Sync of its own, counted there).
                self._open[key], self._wrote[key] = True, False
                if conn.vendor == "postgresql" and not batched:
                    counts.round_trips += 1
            if _is_write(sql):
                if self._open.get(key):
                    self._wrote[key] = True
                else:
                    self._durable(conn)  # autocommit: the statement is a transaction
        return execute(sql, params, many, context)

    def _ended(self, conn: Any, *, commit: bool) -> None:
        key = id(conn)
        with self._lock:
            if self._open.get(key):
                self.counts.round_trips += 1
                if commit:
                    self.counts.commits += 1
                    if self._wrote.get(key):
                        self._durable(conn)
            self._open[key], self._wrote[key] = False, False

    def _durable(self, conn: Any) -> None:  # under self._lock
        self.counts.durable_transactions += 1
        if conn.alias == DEFAULT_DB_ALIAS:
            self.counts.main_durable_transactions += 1

    def _synced(self) -> None:
        with self._lock:
            self.counts.round_trips += 1

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

        sync_gen, exit_gen, fetch_gen = (BasePipeline._sync_gen, BasePipeline._exit_gen,
                                         BasePipeline._fetch_gen)

        def counted_sync_gen(pipeline: Any) -> Any:
            counter._synced()  # a Sync: the client waits for the batch's results
            return (yield from sync_gen(pipeline))

        exiting: set[int] = set()  # pipelines inside their final Sync (its Flush is no extra wait)

        def counted_exit_gen(pipeline: Any) -> Any:
            if pipeline.command_queue or pipeline.result_queue:
                counter._synced()
            exiting.add(id(pipeline))
            try:
                return (yield from exit_gen(pipeline))
            finally:
                exiting.discard(id(pipeline))

        def counted_fetch_gen(pipeline: Any, *, flush: bool) -> Any:
            if flush and pipeline.result_queue and id(pipeline) not in exiting:
                counter._synced()  # results asked for without a Sync (a row read in a batch)
            return (yield from fetch_gen(pipeline, flush=flush))

        BasePipeline._sync_gen = counted_sync_gen  # type: ignore[method-assign]
        BasePipeline._exit_gen = counted_exit_gen  # type: ignore[method-assign]
        BasePipeline._fetch_gen = counted_fetch_gen  # type: ignore[method-assign]
        CursorWrapper._execute_with_wrappers = counted_execute  # type: ignore[method-assign]
        BaseDatabaseWrapper._commit = counted_commit  # type: ignore[method-assign]
        BaseDatabaseWrapper._rollback = counted_rollback  # type: ignore[method-assign]
        os.fsync, os.fdatasync = counted_fsync, counted_fdatasync
        try:
            yield self
        finally:
            BasePipeline._sync_gen = sync_gen  # type: ignore[method-assign]
            BasePipeline._exit_gen = exit_gen  # type: ignore[method-assign]
            BasePipeline._fetch_gen = fetch_gen  # type: ignore[method-assign]
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
