"""Story: a worker is SIGKILLed while it clones the replay target.

The clone is made in ``.<target>.clone-<pid>-<hex>`` beside the target and renamed into place
when done, so the kill leaves no half-cloned target -- but it leaves the staging directory. The
next attempt (run creation included) removes staging clones whose attempt is dead, judged by
the ``flock`` that attempt and its git children held, or by the pid when the lock file is
missing; a staging clone whose attempt is alive is never touched.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from runtime.planners.git_history.replay_target import clone_at_base, remove_stale_staging_clones
from tests.planners.gitrepo import History, git

ROOT = Path(__file__).resolve().parents[2]
CLONE = ("import sys; from pathlib import Path; "
         "from runtime.planners.git_history.replay_target import clone_at_base; "
         "clone_at_base(source=Path(sys.argv[1]), base=sys.argv[2], target=Path(sys.argv[3]))")


def _staging(parent: Path, name: str) -> list[Path]:
    return sorted(p for p in parent.iterdir() if p.name.startswith(f".{name}.clone-"))


def test_a_clone_killed_midway_leaves_staging_that_the_next_attempt_removes(
        history: History, tmp_path: Path) -> None:
    target = tmp_path / "target"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", CLONE, str(history.path), history.root,
                              str(target)], env=env, cwd=ROOT, start_new_session=True)
    deadline = time.monotonic() + 60
    while not any(p.is_dir() for p in _staging(tmp_path, "target")):
        assert child.poll() is None and time.monotonic() < deadline, "the clone never started"
        time.sleep(0.001)
    os.killpg(child.pid, signal.SIGKILL)  # the worker and its git children: a machine-level kill
    child.wait(timeout=30)
    time.sleep(0.2)  # let init reap the git children, releasing the inherited lock
    left = _staging(tmp_path, "target")
    assert left and not target.exists()

    clone_at_base(source=history.path, base=history.root, target=target)

    assert _staging(tmp_path, "target") == []
    assert git(target, "rev-parse", "HEAD").strip() == history.root


def test_a_staging_clone_of_a_live_attempt_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "target"
    live = tmp_path / f".target.clone-{os.getpid()}-0a0b0c0d"
    live.mkdir()
    lock = live.with_name(live.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert remove_stale_staging_clones(target) == []
        assert live.is_dir()
    finally:
        os.close(fd)
    assert remove_stale_staging_clones(target) == [live.name]
    assert not live.exists() and not lock.exists()


def test_without_a_lock_file_the_pid_decides(tmp_path: Path) -> None:
    target = tmp_path / "target"
    mine = tmp_path / f".target.clone-{os.getpid()}-00000001"
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = tmp_path / f".target.clone-{dead.pid}-00000002"
    other = tmp_path / ".other.clone-1-00000003"
    for path in (mine, gone, other):
        path.mkdir()

    assert remove_stale_staging_clones(target) == [gone.name]
    assert mine.is_dir() and other.is_dir()
