"""Connecting to the SQL adapter's target database (SQLite or PostgreSQL via psycopg 3).

DESIGN.md section 5.11. Every adapter call runs in one short transaction on a fresh connection
(no pool: a worker killed mid-call leaves nothing behind in its parent, and a test may drop a
database right after). On SQLite the transaction starts with ``BEGIN IMMEDIATE`` -- the write
lock is taken before the first read, so two writers cannot both read "no receipt" and then both
write -- and commits with ``synchronous=FULL``. On PostgreSQL the fence row's compare-and-set
serialises writers (:mod:`runtime.adapters.sql.store`) and ``lock_timeout`` bounds lock waits.
Imports nothing from Django.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.pool import NullPool

from runtime.errors import AdapterTargetError, SqlCredentialRejectedError, SqlTargetUnavailableError

_LOGIN_REFUSED = ("28000", "28P01")
"""SQLSTATE class 28, invalid authorization: a retry with the same credential cannot succeed."""


def target_url(*, target: str | Path | None, url: str | None, url_env: str | None, base_dir: Path | None) -> str:
    """The SQLAlchemy URL of the target: ``url``, else ``$url_env``, else ``target`` as a SQLite file.

    ``postgres://``/``postgresql://`` become ``postgresql+psycopg://``; a relative SQLite path is
    taken against ``base_dir`` (the task file's directory).

    Raises:
        AdapterTargetError: nothing names a target, the variable is unset, or the scheme is
            neither SQLite nor PostgreSQL (the message never repeats the URL: it may hold a
            password).
    """
    raw: str | None = url
    if raw is None and url_env is not None:
        raw = os.environ.get(url_env)
        if not raw:
            raise AdapterTargetError("the variable naming the SQL target is unset", variable=url_env)
    if raw is None:
        if target is None or not str(target):
            raise AdapterTargetError("the SQL adapter needs options.url, options.url_env or a SQLite file target")
        path = Path(target)
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        return f"sqlite+pysqlite:///{path}"
    scheme, sep, rest = raw.partition("://")
    if not sep:
        raise AdapterTargetError("the SQL target URL has no scheme", kind="sql")
    if scheme in ("postgres", "postgresql", "postgresql+psycopg"):
        return f"postgresql+psycopg://{rest}"
    if scheme in ("sqlite", "sqlite+pysqlite"):
        path_text = rest[1:] if rest.startswith("/") else rest
        path = Path(path_text)
        if path_text and not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        return f"sqlite+pysqlite:///{path}"
    raise AdapterTargetError("the SQL adapter speaks SQLite and PostgreSQL only", scheme=scheme[:20])


def target_engine(url: str, *, timeout_seconds: float) -> Engine:
    """An engine on ``url`` with one fresh connection per transaction.

    Args:
        url: a URL from :func:`target_url`.
        timeout_seconds: SQLite's busy timeout / PostgreSQL's ``lock_timeout`` (seconds).

    Raises:
        AdapterTargetError: the URL does not parse or its driver is missing.
    """
    try:
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite":
            engine = create_engine(parsed, poolclass=NullPool, connect_args={"timeout": timeout_seconds})
            event.listen(engine, "connect", _sqlite_connect)
            event.listen(engine, "begin", _sqlite_begin)
            return engine
        options = f"-c lock_timeout={int(timeout_seconds * 1000)}"
        return create_engine(parsed, poolclass=NullPool, connect_args={"connect_timeout": 10, "options": options})
    except (ArgumentError, NoSuchModuleError, ValueError):
        raise AdapterTargetError("the SQL target URL does not parse", kind="sql") from None


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let us issue BEGIN ourselves (the driver's implicit BEGIN is DEFERRED).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE")


@contextmanager
def target_transaction(engine: Engine, *, instance_id: str = "", snapshot: bool = False) -> Iterator[Connection]:
    """A connection inside one transaction; commits when the block ends, rolls back on error.

    ``snapshot=True`` reads one consistent snapshot on PostgreSQL (``REPEATABLE READ``), so an
    observation never pairs the version counter from before a concurrent commit with rows from
    after it; writes keep ``READ COMMITTED``, whose statements see what committed while they
    waited for the fence row's lock. SQLite's ``BEGIN IMMEDIATE`` serialises both anyway.

    A failure to connect or a lock wait that timed out becomes :class:`SqlTargetUnavailableError`
    (retryable, nothing committed). Errors raised inside the block pass through unchanged after
    the rollback. A caller that must tell "not committed" from "outcome unknown" commits
    inside the block itself (``conn.commit()``) and handles the commit's error.

    Raises:
        SqlTargetUnavailableError: the database could not be reached or stayed locked.
        SqlCredentialRejectedError: the server refused the login (not retryable).
    """
    try:
        conn = engine.connect()
    except DBAPIError as exc:
        if _login_refused(exc.orig):
            raise SqlCredentialRejectedError(instance_id=instance_id or None) from None
        raise SqlTargetUnavailableError(instance_id=instance_id or None, driver_error=type(exc.orig).__name__) from None
    try:
        if snapshot and engine.dialect.name == "postgresql":
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        try:
            conn.begin()
        except DBAPIError as exc:
            raise SqlTargetUnavailableError(instance_id=instance_id or None,
                                            driver_error=type(exc.orig).__name__) from None
        yield conn
        if conn.in_transaction():
            conn.commit()
    finally:
        conn.close()  # rolls back whatever was not committed


def _login_refused(orig: Any) -> bool:
    # libpq reports a refused login before a session exists, often without a SQLSTATE on the
    # exception; its message then says so in these words.
    if getattr(orig, "sqlstate", None) in _LOGIN_REFUSED:
        return True
    text = str(orig).lower()
    refused = ("password authentication failed", "is not permitted to log in", "no pg_hba.conf entry")
    return any(words in text for words in refused) or ('role "' in text and "does not exist" in text)
