"""Story: recovery-stats tells operators whether recoveries really recovered (DESIGN.md section 8).

Recovery success rate drives rollouts: crossing its threshold stops new runs. A resume after a
crash that restores the checkpoint but then has to freeze the run for a human -- the cached
receipt is gone from the adapter, or the environment drifted while the worker was dead -- did
not recover the run, and must count as a failed recovery, not as a success. A clean resume
counts as a success, with its duration.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.checkpoints.receipts import receipt_cache_put
from runtime.engine import run_advance
from tests.engine.support import restore, run_adapter, run_target
from tests.helpers.procs import run_killed_at, run_manage
from tests.planners.gitrepo import git

pytestmark = pytest.mark.django_db(transaction=True)



def _killed_settled(replay_task: Path) -> str:
    """A run killed right after its first receipt committed alone, nothing pending: the child
    does not fold the next intent into that receipt (one commit per write, DESIGN.md section
    4.13), so the recovered run's first step is a proposal, not a write."""
    return run_killed_at(replay_task, "engine.after_step_commit", RATCHET_FOLD_INTENTS="0")


def _stats(run_id: str) -> dict:
    out = run_manage("recovery_stats", "--json", "--run", run_id)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_it_counts_a_clean_resume_as_a_successful_recovery(replay_task: Path) -> None:
    run_id = run_killed_at(replay_task, "engine.after_execute:2")

    assert run_advance(run_id=run_id, wait_seconds=10).phase == "completed"

    stats = _stats(run_id)
    assert (stats["recoveries"], stats["succeeded"], stats["failed"]) == (1, 1, 0)
    assert stats["success_rate"] == 1.0 and stats["duration_median_seconds"] >= 0


def test_it_counts_a_resume_that_freezes_on_a_missing_receipt_as_failed(replay_task: Path) -> None:
    run_id = run_killed_at(replay_task, "engine.after_receipt_cache")
    pending = restore(run_id).state.pending
    # The cache row is written by the receipt commit itself (DESIGN.md section 4.3), so the kill
    # left none; put the adapter's receipt there, as a runtime that cached it first would have.
    receipt_cache_put(run_id=run_id, receipt=run_adapter(run_id).lookup_receipt(pending.idempotency_key))
    git(run_target(run_id), "reset", "-q", "--hard", pending.pre_state.version)

    report = run_advance(run_id=run_id, wait_seconds=10)

    assert (report.phase, report.stop_reason) == ("needs_review", "receipt_missing")
    stats = _stats(run_id)
    assert (stats["recoveries"], stats["succeeded"], stats["failed"]) == (1, 0, 1)
    assert stats["success_rate"] == 0.0


def test_it_counts_a_resume_that_freezes_on_drift_as_failed(replay_task: Path) -> None:
    run_id = run_killed_at(replay_task, "engine.after_step_commit")
    (run_target(run_id) / "README.md").write_text("edited while the worker was dead\n")

    report = run_advance(run_id=run_id, wait_seconds=10)

    assert (report.phase, report.stop_reason) == ("needs_review", "environment_drift")
    stats = _stats(run_id)
    assert (stats["recoveries"], stats["succeeded"], stats["failed"]) == (1, 0, 1)


def test_it_counts_a_recovery_that_froze_two_checkpoints_later_as_failed(replay_task: Path) -> None:
    run_id = _killed_settled(replay_task)
    recovered = run_advance(run_id=run_id, wait_seconds=10, max_steps=1)  # proposes: not a write
    assert (recovered.recovered, recovered.phase) == (True, "pending")
    (run_target(run_id) / "README.md").write_text("edited before the recovered run wrote anything\n")

    report = run_advance(run_id=run_id, wait_seconds=10)

    assert (report.phase, report.stop_reason) == ("needs_review", "environment_drift")
    stats = _stats(run_id)
    assert (stats["recoveries"], stats["succeeded"], stats["failed"], stats["frozen"]) == (1, 0, 1, 1)
    assert stats["success_rate"] == 0.0


def test_it_leaves_a_recovery_open_until_the_run_writes_or_freezes(replay_task: Path) -> None:
    run_id = _killed_settled(replay_task)

    run_advance(run_id=run_id, wait_seconds=10, max_steps=1)

    assert (_stats(run_id)["recoveries"], _stats(run_id)["open"]) == (0, 1)
    assert run_advance(run_id=run_id).phase == "completed"
    assert (_stats(run_id)["succeeded"], _stats(run_id)["open"]) == (1, 0)
