"""Restoring the main database from a backup fails closed: the high-water marks live in a store of
their own by default (DESIGN.md section 4.2).

Real processes on a fresh var dir with nothing but ``DATABASE_URL`` set (the embedded default, a
second SQLite file beside the main one): ``manage.py migrate`` sets both up; a run is killed
mid-way, the main database is backed up, the run is resumed to the end, the backup is put back.
The mark still names the generation the backup never saw, so the next resume refuses, writes
nothing and leaves the run for a human.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from django.db import connections

from runtime.models import HighWaterMark
from tests.factories import write_scripted_task
from tests.helpers.procs import KILLED, child_env, run_manage

MARKS = "runtime_highwatermark"


class Install:
    """A fresh install in ``root``: ``main.sqlite3``, its default mark store and a var dir."""

    def __init__(self, root: Path) -> None:
        self.root, self.main, self.hwm = root, root / "main.sqlite3", root / "main-hwm.sqlite3"
        (root / "var").mkdir()
        self.env = child_env(DATABASE_URL=f"sqlite:///{self.main}", RATCHET_VAR_DIR=str(root / "var"))

    def manage(self, *args: str, **overrides: str):  # type: ignore[no-untyped-def]
        return run_manage(*args, env={**self.env, **overrides}, timeout=120)

    def rows(self, database: Path, sql: str, *params: object) -> list[tuple]:
        with closing(sqlite3.connect(database)) as conn:  # closed: files get swapped under it
            return conn.execute(sql, params).fetchall()

    def tables(self, database: Path) -> set[str]:
        return {name for (name,) in self.rows(database, "SELECT name FROM sqlite_master WHERE type = 'table'")}


def _copy_database(source: Path, target: Path) -> None:
    """A file-level backup or restore of a SQLite database (no process has it open)."""
    for suffix in ("-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(source, target)
    for suffix in ("-wal", "-shm"):
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", f"{target}{suffix}")


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture
def install(tmp_path: Path, ratchet_keys: object) -> Install:
    fresh = Install(tmp_path)
    migrated = fresh.manage("migrate", "-v", "0")  # one command, no --database: both stores
    assert migrated.returncode == 0, migrated.stderr
    return fresh


def test_it_sets_up_two_distinct_stores_with_one_migrate(install: Install) -> None:
    assert MARKS in install.tables(install.hwm)
    assert MARKS not in install.tables(install.main)  # the main database cannot hold a mark
    assert "runtime_run" not in install.tables(install.hwm)  # nor the store anything else


@pytest.mark.django_db(transaction=True)
def test_it_keeps_the_marks_apart_on_either_database_engine(start_run) -> None:  # type: ignore[no-untyped-def]
    """In process, on SQLite and PostgreSQL alike: the mark store is another database."""
    state, _ = start_run()

    names = {alias: connections[alias].settings_dict["NAME"] for alias in ("default", "hwm")}
    assert names["hwm"] != names["default"]
    assert HighWaterMark.objects.using("hwm").filter(run_id=state.identity.run_id).exists()
    assert MARKS not in connections["default"].introspection.table_names()


def test_it_fails_closed_when_the_main_database_is_restored_from_a_backup(install: Install) -> None:
    task = write_scripted_task(install.root, steps=[
        {"target": f"f{i}.txt", "content": f"v{i}"} for i in range(4)])
    killed = install.manage("run", str(task), "--no-progress", RATCHET_CRASH_AT="checkpoint.after_commit:3",
                             RATCHET_LEASE_SECONDS="5")  # short: the dead holder's lease runs out soon
    assert killed.returncode == KILLED, killed.stderr
    run_id = killed.stdout.splitlines()[0].removeprefix("run ")
    _copy_database(install.main, install.root / "backup.sqlite3")  # taken while the run was live
    backed_up = install.rows(install.main, "SELECT generation FROM runtime_run WHERE run_id = ?", run_id)
    done = install.manage("resume", run_id, "--wait", "10", "--no-progress")
    assert done.returncode == 0 and "verdict: completed" in done.stdout, done.stdout + done.stderr
    [(mark,)] = install.rows(install.hwm, f"SELECT generation FROM {MARKS} WHERE run_id = ?", run_id)
    assert mark > backed_up[0][0]

    _copy_database(install.root / "backup.sqlite3", install.main)
    workspace = _files(install.root / "ws")
    resumed = install.manage("resume", run_id, "--json", "--wait", "10", "--no-progress")

    assert resumed.returncode == 1, resumed.stderr
    verdict = json.loads(resumed.stdout)
    assert (verdict["error"], verdict["retryable"]) == ("CheckpointNotFoundError", False)
    # Nothing written: the mark, the restored main database and the workspace are as they were.
    assert install.rows(install.hwm, f"SELECT generation FROM {MARKS} WHERE run_id = ?", run_id) == [(mark,)]
    assert install.rows(install.main, "SELECT max(generation) FROM runtime_checkpoint WHERE run_id = ?",
                        run_id) == backed_up
    assert _files(install.root / "ws") == workspace
    # Frozen for a human: the restore failure is the newest trace event, which the sweeper
    # never re-queues (runtime/workers/sweeper.py).
    [(event, payload)] = install.rows(
        install.main, "SELECT event_type, payload FROM runtime_traceevent WHERE run_id = ? ORDER BY seq DESC "
        "LIMIT 1", run_id)
    assert (event, json.loads(payload)["error"]) == ("recovery.failed", "CheckpointNotFoundError")


def test_it_moves_marks_an_older_release_left_in_the_main_database(install: Install) -> None:
    """An upgrade from a release that kept the marks in the main database loses none."""
    [(create,)] = install.rows(install.hwm, "SELECT sql FROM sqlite_master WHERE name = ?", MARKS)
    insert = (f"INSERT INTO {MARKS} (task_id, run_id, environment_instance_id, generation, checkpoint_digest, "
              "updated_at) VALUES (?, ?, 'env', ?, ?, '2026-01-01 00:00:00')")
    with closing(sqlite3.connect(install.main)) as conn, conn:
        conn.execute(create)
        conn.execute(insert, ("t", "old-run", 7, "sha256:old"))
        conn.execute(insert, ("t", "both", 3, "sha256:stale"))
    with closing(sqlite3.connect(install.hwm)) as conn, conn:
        conn.execute(insert, ("t", "both", 5, "sha256:newer"))

    migrated = install.manage("migrate")

    assert migrated.returncode == 0, migrated.stderr
    assert "moved 2 high-water mark(s)" in migrated.stdout
    assert install.rows(install.hwm, f"SELECT run_id, generation, checkpoint_digest FROM {MARKS} ORDER BY run_id"
                        ) == [("both", 5, "sha256:newer"), ("old-run", 7, "sha256:old")]  # the store wins
    assert install.rows(install.main, f"SELECT count(*) FROM {MARKS}") == [(0,)]


def test_it_refuses_a_mark_store_that_is_the_main_database(install: Install) -> None:
    checked = install.manage("check", RATCHET_HWM_DATABASE_URL=f"sqlite:///{install.main}")

    assert checked.returncode != 0
    assert "RATCHET_HWM_DATABASE_URL names the main database" in checked.stderr


def test_it_warns_when_many_workers_would_keep_their_marks_in_a_local_file(install: Install) -> None:
    checked = install.manage("check", DATABASE_URL="postgres://ratchet@127.0.0.1:5432/ratchet",
                             RATCHET_HWM_DATABASE_URL=f"sqlite:///{install.hwm}")

    assert checked.returncode == 0, checked.stderr
    assert "runtime.W001" in checked.stderr + checked.stdout


@pytest.fixture
def postgres_install(tmp_path: Path, ratchet_keys: object, transactional_db):  # type: ignore[no-untyped-def]
    """A fresh PostgreSQL install: ``<test db>_main`` and its default ``<..>_main_hwm``, dropped after."""
    import psycopg

    from tests.helpers.procs import database_url

    test_url = database_url()
    name = f"{test_url.rsplit('/', 1)[1][:40]}_main"
    admin = test_url.rsplit("/", 1)[0].replace("postgres://", "postgresql://") + "/postgres"
    names = (name, f"{name}_hwm", f"{name}_backup")

    def sql(*statements: str) -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)

    sql(*(f'DROP DATABASE IF EXISTS "{n}"' for n in names),
        f'CREATE DATABASE "{name}"', f'CREATE DATABASE "{name}_hwm"')
    (tmp_path / "var").mkdir()
    env = child_env(DATABASE_URL=test_url.rsplit("/", 1)[0] + "/" + name, RATCHET_VAR_DIR=str(tmp_path / "var"))
    assert run_manage("migrate", "-v", "0", env=env, timeout=300).returncode == 0
    yield env, name, sql, test_url.rsplit("/", 1)[0].replace("postgres://", "postgresql://")
    sql(*(f'DROP DATABASE IF EXISTS "{n}" WITH (FORCE)' for n in names))


@pytest.mark.postgres
def test_it_fails_closed_when_the_main_postgres_database_is_restored_from_a_backup(  # type: ignore[no-untyped-def]
        postgres_install, tmp_path: Path):
    import psycopg

    env, name, sql, server = postgres_install

    def one(database: str, query: str, *params: object) -> tuple:
        with psycopg.connect(f"{server}/{database}") as conn:
            return conn.execute(query, params).fetchone()

    task = write_scripted_task(tmp_path, steps=[{"target": f"f{i}.txt", "content": f"v{i}"} for i in range(4)])
    killed = run_manage("run", str(task), "--no-progress", env={
        **env, "RATCHET_CRASH_AT": "checkpoint.after_commit:3", "RATCHET_LEASE_SECONDS": "5"})
    assert killed.returncode == KILLED, killed.stderr
    run_id = killed.stdout.splitlines()[0].removeprefix("run ")
    sql(f'CREATE DATABASE "{name}_backup" TEMPLATE "{name}"')  # pg_dump would do; this is faster
    done = run_manage("resume", run_id, "--wait", "10", "--no-progress", env=env, timeout=120)
    assert done.returncode == 0 and "verdict: completed" in done.stdout, done.stdout + done.stderr
    (mark,) = one(f"{name}_hwm", f"SELECT generation FROM {MARKS} WHERE run_id = %s", run_id)

    sql(f'DROP DATABASE "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}" TEMPLATE "{name}_backup"')
    resumed = run_manage("resume", run_id, "--json", "--wait", "10", "--no-progress", env=env, timeout=120)

    assert resumed.returncode == 1, resumed.stderr
    assert json.loads(resumed.stdout)["error"] == "CheckpointNotFoundError"
    assert one(f"{name}_hwm", f"SELECT generation FROM {MARKS} WHERE run_id = %s", run_id) == (mark,)
    assert one(name, "SELECT max(generation) FROM runtime_checkpoint WHERE run_id = %s", run_id)[0] < mark
    assert one(name, "SELECT event_type FROM runtime_traceevent WHERE run_id = %s ORDER BY seq DESC LIMIT 1",
               run_id) == ("recovery.failed",)
