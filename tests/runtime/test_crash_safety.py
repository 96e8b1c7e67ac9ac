"""Crash safety with real processes: a worker SIGKILLed at each step of a commit.

DESIGN.md section 4: "a crash between writing checkpoint g+1 and advancing the HWM leaves g intact
and recoverable"; section 8: kill the process before and after every persistence step. A child
worker arms one crash point (``RATCHET_CRASH_AT``) and SIGKILLs itself there; the test then
inspects the database and lets a restarted worker recover.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from pathlib import Path

import psycopg
import pytest

from runtime.checkpoints.protocol import checkpoint_restore
from tests.factories import scenario_fingerprint
from tests.helpers.procs import KILLED, child_env, run_manage, run_worker

POINTS = ["checkpoint.after_ledger_rows", "checkpoint.after_append", "checkpoint.before_hwm_cas",
          "checkpoint.after_hwm_cas"]
PAST_COMMIT_POINT = ("checkpoint.before_hwm_cas", "checkpoint.after_hwm_cas")
"""With the mark in its own database, these follow the main transaction's commit."""


def _new_run(env: dict[str, str] | None = None) -> str:
    run_id = uuid.uuid4().hex
    created = run_worker(
        "create", "--run-id", run_id, "--worker", "worker-a", "--marker", "g1", env=env
    )
    assert created.last["outcome"] == "created", created.stderr
    return run_id


def _crash(run_id: str, point: str, env: dict[str, str]) -> None:
    killed = run_worker(
        "commit",
        "--run-id",
        run_id,
        "--worker",
        "worker-a",
        "--marker",
        "g2",
        env={**env, "RATCHET_CRASH_AT": point},
    )
    assert killed.returncode == KILLED, (killed.returncode, killed.stderr)
    assert not [e for e in killed.events if e.get("outcome") == "committed"]


@pytest.mark.django_db(transaction=True)
def test_a_crash_point_can_fire_on_its_nth_hit(start_run):
    run_id = start_run(worker="worker-a")[0].identity.run_id

    killed = run_worker(
        "commit",
        "--run-id",
        run_id,
        "--worker",
        "worker-a",
        "--marker",
        "m",
        "--times",
        "3",
        env=child_env(RATCHET_CRASH_AT="checkpoint.after_append:3"),
    )

    assert killed.returncode == KILLED
    assert [e["generation"] for e in killed.events if e["outcome"] == "committed"] == [2, 3]
    restored = checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint())
    assert (restored.generation, restored.state.planner_state["marker"]) == (3, "m-2")


# --- the HWM in its own database -------------------------------------------------------------


class SplitStores:
    """A main database and a separate HWM database, both readable without Django."""

    def __init__(self, env: dict[str, str], main: str, hwm: str, vendor: str) -> None:
        self.env, self.main, self.hwm, self.vendor = env, main, hwm, vendor

    def _one(self, url: str, sql: str, params: tuple) -> tuple | None:
        if self.vendor == "sqlite":
            with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
                return conn.execute(sql.replace("%s", "?"), params).fetchone()
        with psycopg.connect(url.replace("postgres://", "postgresql://")) as conn:
            return conn.execute(sql, params).fetchone()

    def hwm_generation(self, run_id: str) -> int:
        return self._one(
            self.hwm, "SELECT generation FROM runtime_highwatermark WHERE run_id = %s", (run_id,)
        )[0]

    def run_mirror(self, run_id: str) -> tuple[int, int]:
        """``(generation mirror, state_version)`` of the run row in the main database."""
        return self._one(
            self.main,
            "SELECT generation, state_version FROM runtime_run WHERE run_id = %s",
            (run_id,),
        )

    def main_has_hwm_rows(self, run_id: str) -> bool:
        """True if the main database holds an HWM row for the run (SQLite's has no HWM table)."""
        try:
            found = self._one(
                self.main, "SELECT count(*) FROM runtime_highwatermark WHERE run_id = %s", (run_id,)
            )
        except (sqlite3.OperationalError, psycopg.errors.UndefinedTable):
            return False  # the main database has no mark table at all (DESIGN.md section 4.2)
        return bool(found and found[0])


@pytest.fixture(scope="module")
def _migrated_sqlite_pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Migrate a main and an HWM SQLite database once per module; tests get copies."""
    template = tmp_path_factory.mktemp("split-template")
    env = child_env(
        DATABASE_URL=f"sqlite:///{template / 'main.sqlite3'}",
        RATCHET_HWM_DATABASE_URL=f"sqlite:///{template / 'hwm.sqlite3'}",
        RATCHET_VAR_DIR=str(template / "var"),
    )
    for args in (["migrate"], ["migrate", "--database", "hwm"]):
        migrated = run_manage(*args, "-v", "0", "--skip-checks", env=env)
        assert migrated.returncode == 0, migrated.stderr
    return template


@pytest.fixture
def sqlite_split(_migrated_sqlite_pair: Path, tmp_path: Path, keys) -> SplitStores:
    for path in _migrated_sqlite_pair.glob("*.sqlite3*"):
        shutil.copyfile(path, tmp_path / path.name)
    main, hwm = f"sqlite:///{tmp_path / 'main.sqlite3'}", f"sqlite:///{tmp_path / 'hwm.sqlite3'}"
    env = child_env(
        DATABASE_URL=main, RATCHET_HWM_DATABASE_URL=hwm, RATCHET_VAR_DIR=str(tmp_path / "var")
    )
    return SplitStores(env, main, hwm, "sqlite")


@pytest.fixture
def default_stores(transactional_db, keys) -> SplitStores:
    """The test databases as settings make them by default: main and its own mark store
    (DESIGN.md section 4.2), SQLite files or PostgreSQL databases, as the test pass runs."""
    from django.db import connection

    from tests.helpers.procs import database_url

    return SplitStores(child_env(), database_url(), database_url("hwm"), connection.vendor)


def _split_story(stores: SplitStores, point: str) -> None:
    env = stores.env
    run_id = _new_run(env)
    assert stores.hwm_generation(run_id) == 1
    assert not stores.main_has_hwm_rows(run_id)  # the HWM really lives in the other database
    mirror_before = stores.run_mirror(run_id)

    _crash(run_id, point, env)

    if point in PAST_COMMIT_POINT:
        # The main transaction is the commit point (DESIGN.md section 4.3): g+1 is committed with
        # its run row, ledger row and trace; the mark is one behind until it is read.
        assert stores.run_mirror(run_id) == (2, mirror_before[1] + 1)
        assert stores.hwm_generation(run_id) == (2 if point == "checkpoint.after_hwm_cas" else 1)
    else:
        assert stores.run_mirror(run_id) == mirror_before
        assert stores.hwm_generation(run_id) == 1

    restored = run_worker("restore", "--run-id", run_id, env=env).last
    if point in PAST_COMMIT_POINT:
        # The restore completed the mark, to exactly the checkpoint the run row names.
        assert stores.hwm_generation(run_id) == 2
        assert (restored["generation"], restored["marker"], restored["ledger"]) == (2, "g2", 1)
    else:
        # Nothing of g+1 survived its rolled-back transaction.
        assert stores.hwm_generation(run_id) == 1
        assert (restored["generation"], restored["marker"], restored["ledger"]) == (1, "g1", 0)

    again = run_worker(
        "commit", "--run-id", run_id, "--worker", "worker-a", "--marker", "next", env=env
    )
    assert again.last["outcome"] == "committed", (again.last, again.stderr)
    assert again.last["generation"] == restored["generation"] + 1
    final = run_worker("restore", "--run-id", run_id, env=env).last
    assert (final["generation"], final["marker"]) == (restored["generation"] + 1, "next")
    assert final["ledger"] == final["generation"] - 1  # one entry per commit, no orphan kept
    assert stores.hwm_generation(run_id) == final["generation"]


# The default-store story below kills at every point on the pass's own database; this one checks
# that a mark store named by RATCHET_HWM_DATABASE_URL behaves the same, so CI runs it at the
# commit point only and `-m slow` at every point.
@pytest.mark.parametrize("point", [p if p == "checkpoint.after_hwm_cas" else pytest.param(p, marks=pytest.mark.slow)
                                   for p in POINTS])
def test_a_worker_killed_mid_commit_with_the_hwm_in_a_separate_sqlite_database_stays_consistent(
    sqlite_split, point
):
    _split_story(sqlite_split, point)


@pytest.mark.parametrize("point", POINTS)
def test_a_worker_killed_mid_commit_with_the_default_mark_store_stays_consistent(default_stores, point):
    _split_story(default_stores, point)
