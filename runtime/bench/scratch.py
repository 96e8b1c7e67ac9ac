"""The bench's throwaway database: its name, creating and dropping it, and the child's checks.

On SQLite the scratch is a file in a temporary directory under ``RATCHET_VAR_DIR``; on PostgreSQL
``<name>_bench`` on the same server. The parent names it to the child in :data:`SCRATCH_ENV`; the
child refuses to measure anywhere else (:func:`scratch_require`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from django.conf import settings

from runtime.errors import BenchmarkScratchError

SCRATCH_ENV = "RATCHET_BENCH_SCRATCH"
"""Set by the parent in the child's environment: the scratch database the child may touch (the
SQLite file path or the PostgreSQL database name). Without it the child refuses to run."""


BROKER_ENV = "RATCHET_BENCH_BROKER_URL"
"""Passed through to the child: the Celery broker (``redis://...``, ``amqp://...``) the orphan
bench's worker uses instead of a SQLite broker file of its own (``runtime.bench.orphaned``)."""


PEER_PYTHON_ENV = "RATCHET_BENCH_PEER_PYTHON"
"""Set by the parent in the child's environment when the ``scale`` section runs: the interpreter
of the DBOS peer's virtual environment (``runtime.bench.peers``)."""


def scratch_env(*, scratch_dir: Path, url: str, marker: str,
                extra: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: ``url`` as its ``DATABASE_URL``, ``scratch_dir/var`` as its var
    dir, ``marker`` in :data:`SCRATCH_ENV`; no inherited ``RATCHET_*`` setting can point it
    elsewhere (the user's HWM database, a media root, the user's keys, an armed crash point): the
    child's high-water mark store is the default one beside its scratch database.
    The exceptions are :data:`BROKER_ENV`, the broker the bench's workers are to use, and
    ``extra``, which the parent sets on purpose (the peer's interpreter, a gateway setting)."""
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith(("RATCHET_", "CELERY_")) or k == BROKER_ENV)
           and k != "DATABASE_URL"}
    env.update(
        DATABASE_URL=url,
        RATCHET_VAR_DIR=str(scratch_dir / "var"),
        RATCHET_LOG_LEVEL="WARNING",  # lease take-overs are expected here; keep the table clean
        DJANGO_SETTINGS_MODULE="runtime.project.settings",
        PYTHONPATH=str(settings.BASE_DIR),
    )
    env.update(extra or {})
    env[SCRATCH_ENV] = marker
    return env


def scratch_postgres_url(*, db: Mapping[str, Any], name: str) -> str:
    """``DATABASE_URL`` with its database name replaced (query options such as sslmode kept)."""
    current = os.environ.get("DATABASE_URL", "")
    if current.startswith(("postgres://", "postgresql://", "pgsql://")):
        parts = urlsplit(current)
        return urlunsplit((parts.scheme, parts.netloc, "/" + quote(name), parts.query, ""))
    auth = quote(str(db.get("USER") or ""), safe="")
    if db.get("PASSWORD"):
        auth += ":" + quote(str(db["PASSWORD"]), safe="")
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    return f"postgres://{auth}@{host}:{port}/{quote(name)}"


def scratch_database_name(*, name: str) -> str:
    """``<name>_bench``, cut to PostgreSQL's 63-byte identifier limit.

    Raises:
        BenchmarkScratchError: the cut name would be the user's own database name.
    """
    scratch = name[: 63 - len("_bench")] + "_bench"
    if scratch == name:
        raise BenchmarkScratchError("the scratch database name equals the real database's",
                                    database=name)
    return scratch


def scratch_peer_name(*, name: str) -> str:
    """The scratch database of the ``scale`` section's DBOS peer beside scratch database ``name``
    (``<name>_dbos``): the peer's system database, never one of Ratchet's."""
    return f"{name[:58]}_dbos"


def scratch_peer_url(*, db: Mapping[str, Any]) -> str:
    """A ``postgresql://`` URL (the form SQLAlchemy takes) of :func:`scratch_peer_name` on the
    server of ``db`` (a Django database settings dict of a scratch database)."""
    parts = urlsplit(scratch_postgres_url(db=db, name=scratch_peer_name(name=str(db["NAME"]))))
    return urlunsplit(("postgresql", parts.netloc, parts.path, parts.query, ""))


def scratch_hwm_name(*, name: str) -> str:
    """The high-water mark store of scratch database ``name``: the ``<name>_hwm`` that
    ``runtime.project.settings`` gives a PostgreSQL database by default (DESIGN.md section 4.2)."""
    return f"{name[:59]}_hwm"


@contextmanager
def scratch_maintenance_connection(db: Mapping[str, Any]) -> Iterator[Any]:
    """An autocommit psycopg connection for CREATE/DROP DATABASE of a scratch database (the
    benchmarks' and the chaos campaign's): to the ``postgres`` maintenance database, or, if that
    is not allowed, to the user's database (only to issue those commands).

    Args:
        db: a Django ``DATABASES`` entry (``HOST``, ``PORT``, ``USER``, ``PASSWORD``, ``NAME``).

    Raises:
        psycopg.OperationalError: neither database accepts the connection.
    """
    import psycopg

    params = {"host": db.get("HOST") or "127.0.0.1", "port": db.get("PORT") or 5432,
              "user": db.get("USER") or None, "password": db.get("PASSWORD") or None,
              "connect_timeout": 10, "autocommit": True}
    try:
        conn = psycopg.connect(dbname="postgres", **params)
    except psycopg.OperationalError:
        conn = psycopg.connect(dbname=db["NAME"], **params)
    try:
        yield conn
    finally:
        conn.close()


def scratch_database_create(*, settings_dict: Mapping[str, Any]) -> str:
    """Create the empty scratch database ``<name>_bench`` beside ``settings_dict``'s; return it.

    Raises:
        BenchmarkScratchError: it already exists (another bench is running, or one crashed:
            the error names the database to drop by hand) or the server refused.
    """
    import psycopg
    from psycopg import sql

    name = scratch_database_name(name=str(settings_dict["NAME"]))
    try:
        with scratch_maintenance_connection(settings_dict) as conn:
            # And the child's high-water mark store, <scratch>_hwm (runtime.project.settings'
            # default), and the scale section's peer's system database, <scratch>_dbos.
            for each in (name, scratch_hwm_name(name=name), scratch_peer_name(name=name)):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(each)))
    except psycopg.errors.DuplicateDatabase:
        raise BenchmarkScratchError(
            "the scratch database already exists: another bench is running, or one was killed "
            "before it could drop it (drop it by hand once no bench is running)", database=name,
        ) from None
    except psycopg.Error as exc:
        raise BenchmarkScratchError(f"cannot create the scratch database ({type(exc).__name__})",
                                    database=name) from None
    return name


def scratch_database_drop(*, settings_dict: Mapping[str, Any], name: str) -> None:
    """Drop the scratch database ``name`` (only ever a name :func:`scratch_database_name` made).

    Raises:
        BenchmarkScratchError: ``name`` is not the scratch name for ``settings_dict``'s database,
            or the server refused (the message names the database to drop by hand).
    """
    import psycopg
    from psycopg import sql

    if name != scratch_database_name(name=str(settings_dict["NAME"])):
        raise BenchmarkScratchError("refusing to drop a database that is not the bench's scratch",
                                    database=name)
    try:
        with scratch_maintenance_connection(settings_dict) as conn:
            force = sql.SQL(" WITH (FORCE)") if conn.info.server_version >= 130000 else sql.SQL("")
            for each in (scratch_peer_name(name=name), scratch_hwm_name(name=name), name):
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(each))
                             + force)
    except psycopg.Error as exc:
        raise BenchmarkScratchError(
            f"cannot drop the scratch database ({type(exc).__name__}); drop it by hand",
            database=name,
        ) from None


def scratch_require() -> None:
    """Fail closed unless this process is connected to the scratch database its parent made.

    Raises:
        BenchmarkScratchError: :data:`SCRATCH_ENV` is not set, or names another database than the
            one this process is connected to, or that database is not shaped like a scratch
            one, or the high-water mark store is not the scratch database's own default one.
    """
    marker = os.environ.get(SCRATCH_ENV, "")
    db = settings.DATABASES["default"]
    hwm = settings.DATABASES.get("hwm", {})
    name = str(db.get("NAME", ""))
    engine = str(db.get("ENGINE", ""))
    if not marker:
        raise BenchmarkScratchError(
            f"refusing to benchmark outside a throwaway database: {SCRATCH_ENV} is not set",
            database=Path(name).name,
        )
    if engine.endswith("sqlite3"):
        path = Path(name).resolve()
        # Also the shape bench_run_isolated gives it: <var>/bench-XXXX/bench.sqlite3.
        ok = (path == Path(marker).resolve() and path.name == "bench.sqlite3"
              and path.parent.name.startswith("bench-"))
        hwm_ok = Path(str(hwm.get("NAME", ""))).resolve() == path.with_name("bench-hwm.sqlite3")
    else:
        ok = name == marker and name.endswith("_bench")
        hwm_ok = (hwm.get("NAME") == scratch_hwm_name(name=name)
                  and (hwm.get("HOST"), hwm.get("PORT")) == (db.get("HOST"), db.get("PORT")))
    if not ok or not hwm_ok:
        raise BenchmarkScratchError(
            "refusing to benchmark outside a throwaway database: connected to another database "
            "than the bench's scratch", database=Path(name).name,
        )
