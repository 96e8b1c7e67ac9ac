"""The chaos campaign's own store, so its runs never land in the operator's database (section 8.2).

By default ``manage.py chaos`` creates a throwaway store and re-runs itself against it: an SQLite
file (and the high-water mark store beside it) under ``<workdir>/var`` when the configured
database is SQLite, or, when it is PostgreSQL, a database ``<name>_chaos_<8 hex>`` (and its
``_hwm`` store) on the same server, created and dropped by the command (the role needs
``CREATEDB``). The child's environment drops every inherited ``RATCHET_*`` and ``CELERY_*``
variable, so no key file, HWM database or armed crash point of the operator leaks into it; its
keys are made fresh in the scratch var dir.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from runtime.bench.scratch import scratch_maintenance_connection, scratch_postgres_url
from runtime.errors import ChaosSetupError

SCRATCH_ENV = "RATCHET_CHAOS_SCRATCH"
"""Set in the re-run command's environment: the scratch store it runs against (a label)."""

_SUFFIX = "_chaos_"


@dataclass(frozen=True)
class ChaosScratch:
    """A created scratch store: the child's ``env``, a ``label`` for the table, and the PostgreSQL
    database to drop afterwards (``None`` for SQLite, whose files stay in the workdir)."""

    env: dict[str, str]
    label: str
    postgres_name: str | None = None


def _child_env(*, var_dir: Path, url: str, label: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RATCHET_", "CELERY_")) and k != "DATABASE_URL"}
    env.update(DATABASE_URL=url, RATCHET_VAR_DIR=str(var_dir), DJANGO_SETTINGS_MODULE="runtime.project.settings",
               PYTHONPATH=str(settings.BASE_DIR))
    env[SCRATCH_ENV] = label
    return env


def _names(name: str) -> tuple[str, str]:
    # 63 bytes is PostgreSQL's identifier limit; settings name the HWM store name[:59] + "_hwm".
    scratch = f"{name[: 59 - len(_SUFFIX) - 8]}{_SUFFIX}{secrets.token_hex(4)}"
    return scratch, f"{scratch}_hwm"


def chaos_scratch_create(*, workdir: Path) -> ChaosScratch:
    """Create an empty scratch store beside the configured database and migrate it.

    Args:
        workdir: the campaign's directory; the scratch var dir is ``workdir/var``.

    Raises:
        ChaosSetupError: the PostgreSQL server refused to create the database (no ``CREATEDB``:
            pass ``--configured-database`` to use the configured one) or ``migrate`` failed.
    """
    db = settings.DATABASES["default"]
    var_dir = workdir / "var"
    var_dir.mkdir(parents=True, exist_ok=True)
    if str(db["ENGINE"]).endswith("sqlite3"):
        path = var_dir / "chaos.sqlite3"
        scratch = ChaosScratch(env=_child_env(var_dir=var_dir, url=f"sqlite:///{path}", label=str(path)),
                               label=str(path))
    else:
        import psycopg
        from psycopg import sql

        name, hwm = _names(str(db["NAME"]))
        try:
            with scratch_maintenance_connection(db) as conn:
                for each in (name, hwm):
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(each)))
        except psycopg.Error as exc:
            raise ChaosSetupError(f"cannot create the scratch database ({type(exc).__name__}: {exc}); "
                                  "grant CREATEDB or pass --configured-database", database=name) from None
        scratch = ChaosScratch(env=_child_env(var_dir=var_dir, url=scratch_postgres_url(db=db, name=name), label=name),
                               label=f"PostgreSQL database {name}", postgres_name=name)
    done = subprocess.run([sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "migrate", "--no-input",
                           "-v0"], env=scratch.env, cwd=settings.BASE_DIR, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        chaos_scratch_drop(scratch=scratch)
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ChaosSetupError(f"cannot migrate the scratch store: {last}", store=scratch.label)
    return scratch


def chaos_scratch_drop(*, scratch: ChaosScratch) -> None:
    """Drop a PostgreSQL scratch database and its HWM store (SQLite files stay with the workdir).

    Raises:
        ChaosSetupError: the name is not a chaos scratch name, or the server refused (the
            message names the database to drop by hand).
    """
    name = scratch.postgres_name
    if name is None:
        return
    if _SUFFIX not in name:
        raise ChaosSetupError("refusing to drop a database that is not a chaos scratch store", database=name)
    import psycopg
    from psycopg import sql

    try:
        with scratch_maintenance_connection(settings.DATABASES["default"]) as conn:
            force = sql.SQL(" WITH (FORCE)") if conn.info.server_version >= 130000 else sql.SQL("")
            for each in (f"{name}_hwm", name):
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(each)) + force)
    except psycopg.Error as exc:
        raise ChaosSetupError(f"cannot drop the scratch database ({type(exc).__name__}); drop it by hand",
                              database=name) from None
