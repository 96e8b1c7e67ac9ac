"""Story: the replay acceptance check replays a generated history while a chaos monkey SIGKILLs
the workers from outside, whole process group and git children included (DESIGN.md section 8).

The check drives the run in ``manage.py run``/``resume`` children, kills them at seeded random
moments (half of them while a git process runs), resumes after every kill with a one-second
lease, and audits the target with plain git: the tip tree, one commit per source commit with
that commit's tree, one commit per idempotency key, no commit without one, the run completed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.replay_check.acceptance import replay_check_run
from runtime.replay_check.repository import replay_range
from tests.helpers.procs import child_env

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_replays_every_case_exactly_once_under_external_kills(tmp_path: Path, case_repo: Path) -> None:
    report = replay_check_run(source=case_repo, workdir=tmp_path / "check", kills=3, seed=11, lease_seconds=1.0,
                              git_share=0.5, baseline=False, env=child_env(), child_timeout=300)

    assert report.passed, report.table()
    assert report.kills >= 1 and report.children == report.kills + report.takeovers + 1
    assert report.recoveries >= 1 and report.recovery_failures == 0
    assert (report.duplicates, report.unkeyed, report.frozen) == (0, 0, False)
    assert report.commits == report.target_commits == len(replay_range(case_repo).commits)


def test_it_prices_an_uninterrupted_write_apart_from_the_wall_time_under_kills(
        tmp_path: Path, case_repo: Path) -> None:
    """The cost of a write is a second, uninterrupted replay of a sample against a plain git
    loop over the same commits; the killed run's wall time per write (takeovers included) is
    reported beside it and labelled as such."""
    report = replay_check_run(source=case_repo, workdir=tmp_path / "check", kills=1, seed=5, lease_seconds=1.0,
                              baseline=True, cost_commits=6, env=child_env(), child_timeout=300)

    assert report.passed, report.table()
    assert report.cost_commits == 6
    assert report.ms_per_write and report.ms_per_write > 0
    assert report.baseline_ms_per_commit and report.baseline_ms_per_commit > 0
    assert report.cost_ratio == pytest.approx(report.ms_per_write / report.baseline_ms_per_commit)
    assert report.wall_ratio == pytest.approx(report.wall_ms_per_write / report.baseline_ms_per_commit)
    assert report.as_json()["passed"] is True
    table = report.table()
    assert "ms/write uninterrupted vs plain git" in table and "first 6 commits" in table
    assert "ms/write wall time under kills" in table and "takeovers included" in table
    assert "verdict: PASS" in table


@pytest.mark.slow
def test_it_survives_ten_kills_that_all_wait_for_a_git_child(tmp_path: Path, case_repo: Path) -> None:
    report = replay_check_run(source=case_repo, workdir=tmp_path / "check", kills=10, seed=23, lease_seconds=1.0,
                              git_share=1.0, baseline=False, env=child_env(), child_timeout=300)

    assert report.passed, report.table()
    assert (report.duplicates, report.unkeyed, report.frozen) == (0, 0, False)
