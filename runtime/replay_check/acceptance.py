"""``replay_check_run``: the whole replay acceptance check, end to end (DESIGN.md section 8)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from runtime.models import Run
from runtime.replay_check.audit import Audit, Check, replay_audit
from runtime.replay_check.chaos import ChildRecord, KillPlan, chaos_drive
from runtime.replay_check.report import ReplayCheckReport
from runtime.replay_check.repository import WHOLE_HISTORY, replay_range
from runtime.replay_check.task import write_replay_task
from runtime.replay_check.uninterrupted import cost_measure

COST_COMMITS = 200
"""Commits the uninterrupted cost sample replays by default (the first of the range)."""


def replay_check_run(*, source: Path, workdir: Path, kills: int, seed: int, range_: str = WHOLE_HISTORY,
                     lease_seconds: float = 5.0, git_share: float = 0.5, baseline: bool = True,
                     cost_commits: int = COST_COMMITS,
                     env: Mapping[str, str] | None = None, child_timeout: float = 3600.0,
                     on_child: Callable[[ChildRecord], None] | None = None) -> ReplayCheckReport:
    """Replay ``range_`` of ``source`` under ``kills`` seeded external SIGKILLs and audit the result.

    Args:
        source: the repository whose history is replayed (read only; never written).
        workdir: a directory for the task file, the target clone (``target/<run id>/``) and the
            children's logs; kept afterwards as evidence.
        kills: SIGKILLs to deliver (fewer if the run completes first).
        seed: seeds the RNG that picks the kill moments.
        range_: ``"whole"`` (every first-parent commit after the root), ``"last:N"`` or ``"A..B"``.
        lease_seconds: the children's lease time to live, in seconds (a takeover waits this long).
        git_share: the share of kills (0..1) that wait for a git process in the child's group.
        baseline: also measure the cost of a write: the first ``cost_commits`` commits replayed
            again uninterrupted, and a plain git loop over them (:mod:`.uninterrupted`).
        cost_commits: commits in that sample (0: the whole range).
        env: the children's environment (default: this process's).
        child_timeout: seconds after which a hung child is killed and counted as an error.
        on_child: called after every child process.

    Returns:
        The :class:`ReplayCheckReport`; ``passed`` is False on any violation.

    Raises:
        GitReplayError: the source or range cannot be read.
        ValueError: negative ``kills``, ``git_share`` outside 0..1 or a non-positive lease.
    """
    if kills < 0 or not 0.0 <= git_share <= 1.0 or not lease_seconds > 0:
        raise ValueError("kills >= 0, 0 <= git_share <= 1 and lease_seconds > 0 are required")
    source = source.resolve()
    replay = replay_range(source, range_)
    count = len(replay.commits)
    task = write_replay_task(directory=workdir, source=source, range_=replay.range, count=count)
    plan = KillPlan(kills=kills, seed=seed, git_share=git_share)
    log = chaos_drive(task=task, generations_hint=2 * count + 2, plan=plan, lease_seconds=lease_seconds,
                      env=dict(env if env is not None else os.environ), logs=workdir / "logs",
                      child_timeout=child_timeout, on_child=on_child)
    run = Run.objects.filter(run_id=log.run_id).first() if log.run_id else None
    if run is None:
        audit = Audit(checks=(Check("run created", False, log.error or "no run id was announced"),),
                      target_commits=0, duplicates=0, unkeyed=0, recoveries=0, recovery_failures=0,
                      phase="-", stop_reason="")
    else:
        audit = replay_audit(run_id=run.run_id, source=source, replay=replay, target=Path(run.spec["target"]))
    measured = (cost_measure(source=source, replay=replay, workdir=workdir / "uninterrupted",
                             commits=cost_commits) if baseline else None)
    # Per commit the run really made: a drive that ended early must not look cheap.
    wall_ms_per_write = 1000.0 * log.wall_seconds / max(audit.target_commits or count, 1)
    error = log.error
    if measured is not None and not measured.baseline.tree_matches:
        error = (error + "; " if error else "") + "the plain git loop did not reproduce the tip tree"
    if measured is not None and measured.phase != "completed":
        error = (error + "; " if error else "") + f"the uninterrupted sample ended {measured.phase}"
    counted = measured is not None and measured.phase == "completed"
    return ReplayCheckReport(
        source=str(source),
        range=replay.range,
        run_id=log.run_id,
        commits=count,
        target_commits=audit.target_commits,
        seed=seed,
        kills_requested=kills,
        kills=log.kills,
        kills_in_git=log.kills_in_git,
        children=len(log.children),
        takeovers=log.takeovers,
        recoveries=audit.recoveries,
        recovery_failures=audit.recovery_failures,
        duplicates=audit.duplicates,
        unkeyed=audit.unkeyed,
        phase=audit.phase,
        stop_reason=audit.stop_reason,
        frozen=audit.phase in ("needs_review", "awaiting_approval"),
        wall_seconds=log.wall_seconds,
        wall_ms_per_write=wall_ms_per_write,
        cost_commits=measured.commits if measured else 0,
        ms_per_write=measured.ms_per_write if measured and counted else None,
        baseline_ms_per_commit=measured.baseline.ms_per_commit if measured else None,
        cost_ratio=measured.ratio if measured and counted else None,
        wall_ratio=(wall_ms_per_write / measured.baseline.ms_per_commit
                    if measured and measured.baseline.commits else None),
        lease_seconds=lease_seconds,
        workdir=str(workdir),
        error=error,
        checks=audit.checks,
    )
