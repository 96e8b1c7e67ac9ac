"""Helpers for the stories with a slow adapter call in a real child process (``child_slow_call``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runtime.engine import run_advance, run_start
from tests.engine.support import write_scripted_task
from tests.helpers.procs import ROOT, child_env, wait_for

CHILD = "tests.engine.child_slow_call"


def pending_run(tmp_path: Path) -> str:
    """A one-write scripted run advanced to ``pending`` (its write proposed, not executed)."""
    task = write_scripted_task(tmp_path / "task", [{"target": "notes/slow.txt", "content": "written slowly\n"}])
    run_id = run_start(spec_path=task)
    assert run_advance(run_id=run_id, max_steps=1).phase == "pending"
    return run_id


def spawn_slow_worker(run_id: str, *, ttl: float, call: float | str, markers: Path,
                      **env: str) -> subprocess.Popen[str]:
    """Start ``child_slow_call`` driving the run's next step as ``slow-worker``."""
    markers.mkdir(exist_ok=True)
    # Run as a module: the script's own directory on sys.path would shadow the stdlib ``http``.
    return subprocess.Popen([sys.executable, "-m", CHILD, run_id, "slow-worker", str(ttl), str(call), str(markers)],
                            env=child_env(**env), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_for_the_call(child: subprocess.Popen[str], markers: Path) -> None:
    """Wait until the child is inside its slow call; fail with its output if it ended first."""
    wait_for(lambda: (markers / "calling").exists() or child.poll() is not None, timeout=60,
             what="the slow call to start")
    if child.poll() is not None:
        stdout, stderr = child.communicate()
        raise AssertionError(f"the child ended before its call: {stdout}\n{stderr}")
