"""git's ``*.lock`` files: ours are cleared after a crash, anyone else's freezes the run.

A worker killed inside ``git update-ref`` leaves ``HEAD.lock`` / ``refs/heads/main.lock``; one
killed inside the checkout leaves ``index.lock`` and a half-written working tree. The adapter's
operation journal (``.git/ratchet-sync.json``) names the locks its interrupted step may have
made, so the next call clears them and finishes the write without a human. A lock no journal
covers -- a developer's ``git`` running, or crashed, in the same repository -- is foreign: it
shows as drift in ``observe()`` and ``execute`` refuses, exactly like an uncommitted edit
(DESIGN.md section 5: drift fails closed). The two recovery crash points (after the locks are
cleared, after the half-written paths are removed) are killed in real child processes too.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from runtime.adapters.git import recovery as git_recovery
from runtime.adapters.git.adapter import GitAdapter
from runtime.core.crashpoints import CRASH_POINTS
from runtime.errors import PreconditionFailedError
from tests.adapters.support import Env, commits_with_key, git, run_child

RECOVERY_POINTS = ["git.recover_after_locks_cleared", "git.recover_after_worktree_cleared"]


def _killed_after_ref_update(env: Env, content: bytes = b"print('v2')\n"):
    action = env.write("src/app.py", content)
    predicted = env.adapter.predict_post_state(action, blobs=env.blobs)
    child = run_child(env, action, "key-1", crash_at="git.after_ref_update")
    assert child.returncode == -signal.SIGKILL, child.stderr
    return action, predicted


def _half_checkout(env: Env) -> None:
    """What a checkout killed midway leaves: index.lock and a torn file."""
    (env.path / ".git" / "index.lock").write_bytes(b"DIRC partial")
    (env.path / "src" / "app.py").write_bytes(b"print(")


def test_it_clears_its_own_index_lock_and_finishes_a_torn_checkout(git_env: Env) -> None:
    action, predicted = _killed_after_ref_update(git_env)
    _half_checkout(git_env)

    adapter = GitAdapter(git_env.path)
    observed = adapter.observe()

    assert observed.state_fingerprint == predicted
    assert not (git_env.path / ".git" / "index.lock").exists()
    assert not (git_env.path / ".git" / "ratchet-sync.json").exists()
    assert git(git_env.path, "status", "--porcelain") == ""
    assert (git_env.path / "src" / "app.py").read_bytes() == b"print('v2')\n"
    receipt = adapter.lookup_receipt("key-1")
    assert git_env.execute(action, "key-1", adapter=adapter) == receipt
    assert commits_with_key(git_env.path, "key-1") == 1


def test_it_clears_ref_locks_of_an_update_ref_that_never_finished(git_env: Env) -> None:
    """Killed inside update-ref before its rename: HEAD did not move, the key is still free."""
    action = git_env.write("notes/todo.txt", b"ship it\n")
    pre = git_env.adapter.observe()
    child = run_child(git_env, action, "key-1", crash_at="git.before_ref_update")
    assert child.returncode == -signal.SIGKILL
    for name in ("HEAD.lock", "refs/heads/main.lock"):
        (git_env.path / ".git" / name).write_text("0" * 40 + "\n")

    adapter = GitAdapter(git_env.path)

    assert adapter.observe().state_fingerprint == pre.state_fingerprint
    assert git_recovery.git_lock_files(git_env.path / ".git") == []
    assert adapter.lookup_receipt("key-1") is None
    git_env.execute(action, "key-1", adapter=adapter)
    assert commits_with_key(git_env.path, "key-1") == 1


def test_a_foreign_lock_is_drift_and_execute_refuses(git_env: Env) -> None:
    before = git_env.adapter.observe()
    (git_env.path / ".git" / "index.lock").write_bytes(b"a developer's git is running")

    after = git_env.adapter.observe()
    with pytest.raises(PreconditionFailedError, match="index.lock"):
        git_env.execute(git_env.write("notes/todo.txt", b"x\n"), "key-1")

    assert after.state_fingerprint != before.state_fingerprint
    assert b"LK .git/index.lock" in after.attachments["status.txt"]
    assert (git_env.path / ".git" / "index.lock").exists(), "never ours to remove"
    assert commits_with_key(git_env.path, "key-1") == 0


def test_a_foreign_lock_during_our_interrupted_write_blocks_recovery(git_env: Env) -> None:
    """The journal names HEAD, ref and index locks; a config.lock is not ours: nothing is
    cleared or restored, and the run sees drift rather than a silently repaired repository."""
    _killed_after_ref_update(git_env)
    _half_checkout(git_env)
    (git_env.path / ".git" / "config.lock").write_text("someone else\n")

    observed = GitAdapter(git_env.path).observe()

    assert (git_env.path / ".git" / "index.lock").exists()
    assert (git_env.path / ".git" / "ratchet-sync.json").exists()
    assert b"LK .git/config.lock" in observed.attachments["status.txt"]
    assert (git_env.path / "src" / "app.py").read_bytes() == b"print("


def test_a_lock_older_than_the_journal_is_not_ours(git_env: Env) -> None:
    _killed_after_ref_update(git_env)
    lock = git_env.path / ".git" / "index.lock"
    lock.write_bytes(b"left long ago")
    old = time.time() - 3600
    os.utime(lock, (old, old))

    GitAdapter(git_env.path).observe()

    assert lock.exists()


def test_a_lock_a_live_process_holds_open_is_not_cleared(git_env: Env) -> None:
    """A developer's git started after the crash writes the same index.lock name: while a live
    process holds it open, it is not ours to remove."""
    action, predicted = _killed_after_ref_update(git_env)
    _half_checkout(git_env)
    lock = git_env.path / ".git" / "index.lock"
    with open(lock, "rb"):
        GitAdapter(git_env.path).observe()
        assert lock.exists()

    assert GitAdapter(git_env.path).observe().state_fingerprint == predicted
    assert not lock.exists()


def test_a_foreign_edit_during_our_interrupted_checkout_is_left_alone(git_env: Env) -> None:
    _killed_after_ref_update(git_env)
    _half_checkout(git_env)
    (git_env.path / "README.md").write_text("a developer's edit\n")

    GitAdapter(git_env.path).observe()

    assert (git_env.path / "README.md").read_text() == "a developer's edit\n"
    assert (git_env.path / ".git" / "ratchet-sync.json").exists()


def test_every_recovery_crash_point_is_registered_and_covered() -> None:
    declared = {value for name, value in vars(git_recovery).items() if name.startswith("CP_")}
    assert declared <= set(CRASH_POINTS)
    assert declared == set(RECOVERY_POINTS)


@pytest.mark.parametrize("point", RECOVERY_POINTS)
def test_a_kill_during_recovery_is_recovered_by_the_next_call(git_env: Env, point: str) -> None:
    action, predicted = _killed_after_ref_update(git_env)
    _half_checkout(git_env)

    recovering = run_child(git_env, action, "key-1", crash_at=point)

    assert recovering.returncode == -signal.SIGKILL, recovering.stderr
    adapter = GitAdapter(git_env.path)
    assert adapter.observe().state_fingerprint == predicted
    receipt = adapter.lookup_receipt("key-1")
    assert receipt is not None
    assert git_env.execute(action, "key-1", adapter=adapter) == receipt
    assert commits_with_key(git_env.path, "key-1") == 1
    assert git(git_env.path, "status", "--porcelain") == ""


def test_a_journal_names_the_branch_head_points_at(tmp_path: Path, git_env: Env) -> None:
    operation = git_recovery.commit_operation(git_env.path / ".git", old="a", new="b",
                                              old_tree="c", new_tree="d")
    assert "refs/heads/main.lock" in operation.locks and "index.lock" in operation.locks
