"""Creating the replay target: a fresh clone of the source at the range's base.

The clone is made in a staging directory beside the target, ``.<target>.clone-<pid>-<hex>``,
and renamed into place when finished, so a crash leaves the target absent (or still empty),
never half-cloned. The cloning process holds an ``flock`` on ``<staging>.lock`` and every git
child inherits that descriptor, so the lock stays held while any process of the attempt --
including a ``git clone`` orphaned by a SIGKILLed worker -- is alive. The next attempt (run
creation included) removes every staging clone of the same target whose lock it can take, or,
where the lock file is missing, whose pid is dead: what a killed attempt left behind never
accumulates, and a live attempt is never disturbed. Imports nothing from Django.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime.errors import GitReplayError, PlannerError, ReplayTargetNotEmptyError
from runtime.planners.git_history.replay_state import read_replay_state
from runtime.planners.git_history.source import resolve_range, run_git
from runtime.taskspec import GitHistoryPlannerSpec, TaskSpec

REPLAY_BRANCH = "ratchet-replay"
"""Branch checked out at the base in a prepared replay target."""


def _replay_spec(spec: TaskSpec) -> GitHistoryPlannerSpec:
    if spec.planner.kind != "git-history":
        raise PlannerError("only a git-history task can prepare a clone-at-base target")
    # The planner table holds the plug-in's options (DESIGN.md section 5.10).
    return GitHistoryPlannerSpec.model_validate(spec.planner.options_json())


def prepare_target(
    spec: TaskSpec,
    target: Path | str,
    *,
    planner_state: Mapping[str, Any] | None = None,
    base_dir: Path | None = None,
) -> str:
    """Create ``target`` as a fresh clone of the spec's replay source at the range's base.

    Args:
        spec: a task spec with a git-history planner.
        target: the directory to create; may exist only as an empty directory.
        planner_state: the run's pinned planner state; its base is used when given, so the clone
            matches the plan even if the source's HEAD moved since the run was created.
        base_dir: resolves a relative ``planner.source`` (specs from ``load_task_spec`` are
            already absolute).

    Returns:
        The base commit id the target is checked out at.

    Raises:
        PlannerError: the spec has no git-history planner.
        ReplayTargetNotEmptyError, GitReplayError: see :func:`clone_at_base`.
    """
    planner = _replay_spec(spec)
    source = Path(planner.source)
    if not source.is_absolute() and base_dir is not None:
        source = Path(base_dir) / source
    if planner_state is not None:
        base = read_replay_state(planner_state).base
    else:
        base, _, _ = resolve_range(source, planner.range)
    clone_at_base(source=source, base=base, target=Path(target))
    return base


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock_is_free(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def remove_stale_staging_clones(target: Path) -> list[str]:
    """Remove staging clones of ``target`` left by killed attempts; return their names.

    A staging clone is stale when its lock file can be locked (no process of its attempt is
    alive) or, without a lock file, when the pid in its name is dead.
    """
    pattern = re.compile(rf"^\.{re.escape(target.name)}\.clone-(\d+)-[0-9a-f]+$")
    removed: list[str] = []
    with contextlib.suppress(FileNotFoundError):
        names = os.listdir(target.parent)
        for name in sorted(names):
            match = pattern.match(name.removesuffix(".lock"))
            if match is None or (name.endswith(".lock") and name[:-5] in names):
                continue
            staging = target.parent / name.removesuffix(".lock")
            lock = staging.with_name(staging.name + ".lock")
            stale = (_lock_is_free(lock) if lock.exists()
                     else not _pid_alive(int(match.group(1))))
            if stale:
                shutil.rmtree(staging, ignore_errors=True)
                with contextlib.suppress(FileNotFoundError):
                    lock.unlink()
                removed.append(staging.name)
    return removed


def clone_at_base(*, source: Path, base: str, target: Path) -> None:
    """Clone ``source`` into ``target`` and check out branch ``ratchet-replay`` at ``base``.

    Staging and clean-up as in the module docstring; ``git clone --no-local`` copies objects
    (never hard-links them to the source) and the ``origin`` remote is removed, so nothing in
    the target can write back to the source.

    Args:
        source: the source repository.
        base: full commit id to check out.
        target: the directory to create; may exist only as an empty directory.

    Raises:
        ReplayTargetNotEmptyError: ``target`` exists and is not an empty directory.
        GitReplayError: cloning or checking out failed (the staging directory is removed).
    """
    if target.is_symlink() or (target.exists() and (not target.is_dir() or any(target.iterdir()))):
        raise ReplayTargetNotEmptyError(target=str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging_clones(target)
    staging = target.parent / f".{target.name}.clone-{os.getpid()}-{secrets.token_hex(4)}"
    lock = staging.with_name(staging.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        held = (fd,)
        run_git(None, "clone", "--no-local", "--no-checkout", "--quiet", "--", str(source),
                str(staging), pass_fds=held)
        run_git(staging, "checkout", "--quiet", "-B", REPLAY_BRANCH, base, pass_fds=held)
        run_git(staging, "remote", "remove", "origin", pass_fds=held)
        head = run_git(staging, "rev-parse", "HEAD", pass_fds=held).decode("ascii").strip()
        if head != base:
            raise GitReplayError(f"clone is at {head}, expected base {base}")
        if target.exists() and any(target.iterdir()):
            raise ReplayTargetNotEmptyError(target=str(target))
        os.replace(staging, target)  # replaces an empty directory atomically on POSIX
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
        os.close(fd)
