"""Story: anyone can repeat the acceptance run with ``manage.py chaos`` (DESIGN.md section 8.2).

A task spec runs in child processes that are SIGKILLed from outside at seeded moments, resumed
by up to N recoverers racing for the lease; after each run the environment equals the
uninterrupted run's, every key has one effect in the adapter's own records, no generation rolled
back and the completion names the final environment. The command exits non-zero on a violation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.chaos.checks import chaos_checks
from runtime.engine import run_advance, run_start
from tests.engine.support import run_target
from tests.helpers.procs import run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def _chaos(task: Path, tmp_path: Path, *args: str) -> dict:
    done = run_manage("chaos", str(task), "--json", "--workdir", str(tmp_path / "chaos"), *args, timeout=600)
    assert done.stdout.startswith("{"), done.stderr
    report = json.loads(done.stdout)
    report["returncode"] = done.returncode
    return report


def test_it_kills_recovers_and_checks_every_run(long_task: Path, tmp_path: Path) -> None:
    # Kill moments are drawn at random against the measured pace of the run, so on a fast machine
    # a seed's only kill can come after the run finished; every attempt must pass its checks, and
    # the story needs one attempt in which a kill landed.
    for seed in ("7", "8", "9", "10"):
        report = _chaos(long_task, tmp_path / seed, "--runs", "1", "--kills", "2", "--recoverers", "2",
                        "--seed", seed)
        assert (report["returncode"], report["violations"], report["passed"]) == (0, [], True)
        assert (report["runs"], report["completed"], report["duplicates"]) == (1, 1, 0)
        assert report["recoveries_failed"] == 0
        if report["kills"] >= 1:
            break
    assert report["kills"] >= 1, "no kill landed in four seeded runs"
    assert report["recoveries_succeeded"] == report["recoveries"] >= 1


@pytest.mark.slow
def test_it_passes_the_quick_mode_on_this_database(long_task: Path, tmp_path: Path) -> None:
    report = _chaos(long_task, tmp_path, "--runs", "3", "--kills", "2", "--recoverers", "3")

    assert (report["returncode"], report["violations"], report["completed"]) == (0, [], 3)
    assert report["success_rate"] == 1.0 and report["duplicates"] == 0


@pytest.mark.postgres
def test_it_passes_the_quick_mode_on_postgres(long_task: Path, tmp_path: Path) -> None:
    report = _chaos(long_task, tmp_path, "--runs", "3", "--kills", "2", "--recoverers", "3")

    assert (report["returncode"], report["violations"], report["completed"]) == (0, [], 3)
    assert report["success_rate"] == 1.0 and report["duplicates"] == 0


def test_it_reports_a_run_whose_environment_differs_from_the_uninterrupted_one(workspace_task: Path) -> None:
    run_id = run_start(spec_path=workspace_task)
    assert run_advance(run_id=run_id).phase == "completed"
    fingerprint = chaos_checks(run_id=run_id, baseline_fingerprint=None, own_target=True).fingerprint

    (run_target(run_id) / "stray.txt").write_text("written behind the runtime's back\n")
    checks = chaos_checks(run_id=run_id, baseline_fingerprint=fingerprint, own_target=True)

    failed = {c.name for c in checks.checks if not c.passed}
    assert "final environment equals the uninterrupted run's" in failed
    assert "completion bound to the final environment version" in failed


def test_it_refuses_a_missing_task_spec(tmp_path: Path) -> None:
    assert run_manage("chaos", str(tmp_path / "nope.toml")).returncode == 2
