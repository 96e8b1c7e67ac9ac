"""Process groups of the replay check's children: start one, see what runs in it, kill it whole.

Every child (``manage.py run`` / ``resume``) starts in a session of its own, so its process group
holds it and every ``git`` process it starts. Killing the group with SIGKILL is what a power cut
or an OOM kill does to a worker: the Python process and a ``git update-ref`` or ``read-tree`` it
is waiting on die at the same instant, which is the window a kill of the Python process alone
never reaches (the git child would finish on its own).

What runs in a group is read from ``/proc`` (Linux). Elsewhere :func:`group_commands` returns
``None`` and the check still kills at random moments, only without knowing whether git was running.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

_PROC = Path("/proc")


def group_start(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, stdout: Path,
                stderr: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` as the leader of a new process group, its output going to two files.

    Files rather than pipes: a killed child cannot leave a pipe half-read, and the logs stay for
    the operator to read after the check.
    """
    with stdout.open("wb") as out, stderr.open("wb") as err:
        return subprocess.Popen(list(argv), env=dict(env), cwd=cwd, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def _comm_and_state(pid: str) -> tuple[str, str] | None:
    try:
        stat = (_PROC / pid / "stat").read_text()
    except OSError:
        return None  # the process exited while we looked
    # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses; split at the last ")".
    head, _, rest = stat.rpartition(")")
    fields = rest.split()
    return (head.partition("(")[2], fields[0]) if fields else None


def _descendants(pid: str) -> list[str]:
    """``pid`` and its descendants, from ``/proc/<pid>/task/<tid>/children`` (a few small reads,
    fast enough to catch a git call that lasts milliseconds; a scan of all of /proc is not)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            tasks = list((_PROC / current / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                todo.extend((task / "children").read_text().split())
            except OSError:
                continue
    return found


def group_commands(pgid: int) -> list[str] | None:
    """Command names (``comm``) of the live processes the group leader ``pgid`` started (itself and
    its descendants); ``None`` where ``/proc`` cannot tell."""
    if not (_PROC / str(os.getpid()) / "task").is_dir():
        return None
    names = []
    for pid in _descendants(str(pgid)):
        seen = _comm_and_state(pid)
        if seen is not None and seen[1] != "Z":
            names.append(seen[0])
    return names


def group_runs_git(pgid: int) -> bool | None:
    """Whether a ``git`` process is alive in group ``pgid`` right now (``None``: cannot tell)."""
    names = group_commands(pgid)
    if names is None:
        return None
    return any(name == "git" or name.startswith("git-") for name in names)


def group_kill(proc: subprocess.Popen[bytes]) -> bool:
    """SIGKILL the whole process group ``proc`` leads; returns False if it had already exited.

    Only ever called on a group this module started (the leader's pid is the group id).
    """
    if proc.poll() is not None:
        return False
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True
