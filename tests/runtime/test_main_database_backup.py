"""Restoring the main database from a backup fails closed when the high-water mark lives in its
own store (DESIGN.md section 4.2).

Two SQLite files, as a deployment with ``RATCHET_HWM_DATABASE_URL`` has them: the main database
is copied (the backup), the run advances, the copy is put back. The mark still names the newer
generation the backup never saw, so resuming refuses and writes nothing.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from pathlib import Path

import pytest

from tests.helpers.procs import child_env, run_manage, run_worker


@pytest.fixture
def split(tmp_path: Path, ratchet_keys: object) -> dict[str, str]:
    env = child_env(DATABASE_URL=f"sqlite:///{tmp_path / 'main.sqlite3'}",
                    RATCHET_HWM_DATABASE_URL=f"sqlite:///{tmp_path / 'hwm.sqlite3'}",
                    RATCHET_VAR_DIR=str(tmp_path / "var"))
    (tmp_path / "var").mkdir()
    for args in (["migrate"], ["migrate", "--database", "hwm"]):
        migrated = run_manage(*args, "-v", "0", "--skip-checks", env=env)
        assert migrated.returncode == 0, migrated.stderr
    return env


def _copy_database(source: Path, target: Path) -> None:
    """A file-level backup or restore of a SQLite database (no process has it open)."""
    for suffix in ("-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(source, target)
    for suffix in ("-wal", "-shm"):
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", f"{target}{suffix}")


def _rows(database: Path, sql: str, *params: object) -> list[tuple]:
    with sqlite3.connect(database) as conn:
        return conn.execute(sql, params).fetchall()


def test_it_fails_closed_when_the_main_database_is_restored_from_a_backup(split: dict[str, str],
                                                                         tmp_path: Path) -> None:
    main, hwm = tmp_path / "main.sqlite3", tmp_path / "hwm.sqlite3"
    run_id = uuid.uuid4().hex
    created = run_worker("create", "--run-id", run_id, "--worker", "worker-a", "--marker", "g1", env=split)
    assert created.last["outcome"] == "created", created.stderr
    _copy_database(main, tmp_path / "backup.sqlite3")
    advanced = run_worker("commit", "--run-id", run_id, "--worker", "worker-a", "--marker", "g2", env=split)
    assert advanced.last == {**advanced.last, "outcome": "committed", "generation": 2}, advanced.stderr

    _copy_database(tmp_path / "backup.sqlite3", main)
    restored = run_worker("restore", "--run-id", run_id, env=split)
    resumed = run_worker("commit", "--run-id", run_id, "--worker", "worker-b", "--marker", "after", env=split)

    assert restored.last["outcome"] == "error", restored.last
    assert resumed.last["outcome"] == "error", resumed.last
    assert restored.last["error"] == "CheckpointNotFoundError"  # the mark names generation 2
    assert _rows(hwm, "SELECT generation FROM runtime_highwatermark WHERE run_id = ?", run_id) == [(2,)]
    assert _rows(main, "SELECT max(generation) FROM runtime_checkpoint WHERE run_id = ?", run_id) == [(1,)]
    assert _rows(main, "SELECT generation FROM runtime_run WHERE run_id = ?", run_id) == [(1,)]


def test_with_the_mark_in_the_main_database_a_backup_is_taken_for_the_committed_state(
        tmp_path: Path, ratchet_keys: object) -> None:
    """Why the mark is kept apart: restored together, mark and checkpoints agree on the past."""
    env = child_env(DATABASE_URL=f"sqlite:///{tmp_path / 'main.sqlite3'}", RATCHET_VAR_DIR=str(tmp_path / "var"))
    (tmp_path / "var").mkdir()
    assert run_manage("migrate", "-v", "0", "--skip-checks", env=env).returncode == 0
    run_id = uuid.uuid4().hex
    assert run_worker("create", "--run-id", run_id, "--worker", "worker-a", "--marker", "g1", env=env).last[
        "outcome"] == "created"
    _copy_database(tmp_path / "main.sqlite3", tmp_path / "backup.sqlite3")
    run_worker("commit", "--run-id", run_id, "--worker", "worker-a", "--marker", "g2", env=env)

    _copy_database(tmp_path / "backup.sqlite3", tmp_path / "main.sqlite3")
    restored = run_worker("restore", "--run-id", run_id, env=env)

    assert (restored.last["outcome"], restored.last["generation"]) == ("restored", 1)
