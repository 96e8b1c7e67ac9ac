"""Story: the health page's numbers, read from the counters, equal ``manage.py recovery_stats``
(the whole-trace audit, ``runtime.observability.stats``) after real runs: a clean recovery, a recovery that
froze the run two checkpoints later, and a run without a crash (DESIGN.md sections 6.6, 8.1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from review.queries.health import counter_totals
from runtime.engine import run_advance, run_start
from runtime.observability.stats import recovery_stats
from tests.engine.conftest import keys, replay_task, source, workspace_task
from tests.engine.support import run_target
from tests.helpers.procs import run_killed_at

__all__ = ["keys", "replay_task", "source", "workspace_task"]

pytestmark = pytest.mark.django_db(transaction=True)



def test_the_page_shows_what_recovery_stats_computes(
    client_for, personas, replay_task: Path, workspace_task: Path
) -> None:
    clean = run_killed_at(replay_task, "engine.after_execute:2")
    assert run_advance(run_id=clean, wait_seconds=10).phase == "completed"
    # the first receipt committed alone (one commit per write off in the child, DESIGN.md section
    # 4.13), so the recovered run's first step proposes and writes nothing
    frozen = run_killed_at(replay_task, "engine.after_step_commit", RATCHET_FOLD_INTENTS="0")
    run_advance(run_id=frozen, wait_seconds=10, max_steps=1)
    (run_target(frozen) / "README.md").write_text("edited before the recovered run wrote anything\n")
    assert run_advance(run_id=frozen, wait_seconds=10).phase == "needs_review"
    assert run_advance(run_id=run_start(spec_path=workspace_task)).phase == "completed"

    stats = recovery_stats()
    totals = counter_totals(user=None)
    page = client_for("reviewer").get(reverse("review:health")).content.decode()

    assert (stats.recoveries, stats.succeeded, stats.failed, stats.frozen) == (2, 1, 1, 1)
    assert (totals.recoveries, totals.succeeded, totals.failed, totals.frozen, totals.open) == (
        stats.recoveries, stats.succeeded, stats.failed, stats.frozen, stats.open)
    assert (totals.duplicate_submissions, totals.audited_runs) == (
        stats.duplicate_submissions, stats.audited_runs)
    assert totals.success_rate == stats.success_rate
    assert totals.duration_p50.holds(stats.duration_median_seconds)
    assert totals.duration_p95.holds(stats.duration_p95_seconds)
    assert totals.duration_mean_seconds == pytest.approx(stats.duration_median_seconds), "one timed recovery"
    assert f"{stats.succeeded} succeeded, {stats.failed} failed of {stats.recoveries} recoveries" in page
    assert f"{100 * stats.success_rate:.1f} %" in page and "(1 froze the run)" in page
    assert f'data-quantile="p50">{totals.duration_p50.label}<' in page
    assert f'metric-value">{stats.duplicate_submissions}<' in page
