"""Story: anyone can repeat the acceptance run with ``manage.py chaos`` (DESIGN.md section 8.2).

A task spec runs in child processes that are SIGKILLed from outside at seeded moments, resumed
by up to N recoverers racing for the lease; after each run the environment equals the
uninterrupted run's, every key has one effect in the adapter's own records, no generation rolled
back and the completion names the final environment. The requested kills are delivered even on
a short task (or the command says so and fails), the runs go to a scratch store of the command's
own, and a task that cannot run unattended is a set-up error, not a finding. Exit statuses: 0
pass, 1 violation, 2 set-up error, 3 fewer kills landed than requested.
"""

from __future__ import annotations

import json
import random
import tomllib
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

import runtime.management.commands.chaos as command
from runtime.chaos.campaign import ChaosReport
from runtime.chaos.checks import chaos_checks
from runtime.chaos.drive import KillSchedule
from runtime.chaos.spec_copy import spec_copy
from runtime.engine import run_advance, run_start
from runtime.models import Run
from tests.engine.support import run_target
from tests.helpers.procs import run_manage

pytestmark = pytest.mark.django_db(transaction=True)
SLOW_MACHINE = pytest.mark.timeout(900)
"""The campaign stories start a dozen Django processes each: seconds on an idle machine, minutes
on a shared and overloaded one, where the suite's 300 s default would cut them off."""

DEMO = Path(__file__).resolve().parents[2] / "runtime" / "task_specs" / "scripted_demo.toml"


def _chaos(task: Path, tmp_path: Path, *args: str) -> dict:
    done = run_manage("chaos", str(task), "--json", "--workdir", str(tmp_path / "chaos"), *args, timeout=600)
    assert done.stdout.startswith("{"), done.stderr
    report = json.loads(done.stdout)
    report["returncode"] = done.returncode
    return report


def _database_exists(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone()[0] == 1


@SLOW_MACHINE
def test_it_lands_every_requested_kill_on_a_short_task(short_task: Path, tmp_path: Path) -> None:
    report = _chaos(short_task, tmp_path, "--runs", "1", "--kills", "3", "--recoverers", "2", "--seed", "7")

    assert (report["returncode"], report["violations"], report["verdict"]) == (0, [], "PASS")
    assert (report["runs"], report["completed"], report["duplicates"]) == (1, 1, 0)
    assert report["kills_requested"] == report["kills_delivered"] == 3
    assert report["recoveries_succeeded"] == report["recoveries"] >= 3
    assert report["recoveries_failed"] == 0


def test_it_fails_with_exit_3_when_fewer_kills_landed_than_requested(
        short_task: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every attempt of a run stopped before its last kill: the campaign says so instead of PASS.
    short = ChaosReport(task=str(short_task), seed=1, runs=2, attempts=8, completed=2, kills_per_run=5,
                        kills_requested=10, kills_delivered=7, kills_total=19, retried=6)
    monkeypatch.setattr("runtime.management.commands.chaos.chaos_campaign", lambda **_: short)

    with pytest.raises(CommandError) as raised:
        call_command("chaos", str(short_task), "--configured-database", "--workdir", str(tmp_path))

    assert raised.value.returncode == 3
    assert "only 7 of 10 requested kills landed" in str(raised.value)
    assert not short.passed and short.table().endswith(short.verdict())


@SLOW_MACHINE
def test_it_keeps_its_runs_out_of_the_configured_database(short_task: Path, tmp_path: Path) -> None:
    scratch = _chaos(short_task, tmp_path / "scratch", "--runs", "1", "--kills", "0")

    assert (scratch["returncode"], scratch["verdict"]) == (0, "PASS")
    assert Run.objects.count() == 0
    if connection.vendor == "postgresql":  # created beside the configured one, dropped afterwards
        assert scratch["store"].startswith(f"{connection.settings_dict['NAME']}_chaos_")
        assert not _database_exists(scratch["store"])
    else:
        assert scratch["store"] == str((tmp_path / "scratch" / "chaos" / "var" / "chaos.sqlite3").resolve())


@SLOW_MACHINE
def test_it_uses_the_configured_database_only_when_asked(short_task: Path, tmp_path: Path) -> None:
    configured = _chaos(short_task, tmp_path / "configured", "--runs", "1", "--kills", "0",
                        "--configured-database")

    assert (configured["returncode"], configured["verdict"]) == (0, "PASS")
    assert configured["store"] == f"configured database {connection.settings_dict['NAME']}"
    assert Run.objects.count() == 2  # the uninterrupted run and the one run, on request only


@SLOW_MACHINE
def test_it_prepares_the_demo_workspace_and_calls_an_unattended_stop_a_set_up_error(tmp_path: Path) -> None:
    # The demo's target directory need not exist: chaos gives each run a fresh one. Its third
    # step waits for a human approval, so the uninterrupted run cannot complete on its own.
    done = run_manage("chaos", str(DEMO), "--runs", "1", "--kills", "1", "--workdir", str(tmp_path / "demo"),
                      timeout=600)

    assert done.returncode == 2, done.stderr
    assert "set-up error (ChaosSetupError)" in done.stderr
    assert "awaiting_approval" in done.stderr
    assert "VIOLATION" not in done.stdout + done.stderr
    assert "workspace directory does not exist" not in done.stderr


def test_an_unknown_fault_kind_is_refused_before_anything_is_made(short_task: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    monkeypatch.setattr(command, "chaos_scratch_create", lambda **kwargs: made.append("scratch"))
    monkeypatch.setattr(command.tempfile, "mkdtemp", lambda **kwargs: made.append("workdir"))
    workdir = tmp_path / "never"

    for extra in (["--workdir", str(workdir)], []):
        with pytest.raises(CommandError, match="--faults 'sigkill,cosmic-ray': choose from sigkill") as refused:
            call_command("chaos", str(short_task), "--faults", "sigkill,cosmic-ray", *extra)
        assert refused.value.returncode == 2

    assert made == [] and not workdir.exists(), "no scratch store and no workdir were made"


def test_it_gives_a_workspace_task_without_its_directory_a_fresh_one(tmp_path: Path) -> None:
    copy, own = spec_copy(spec=DEMO, directory=tmp_path / "run")

    target = Path(tomllib.loads(copy.read_text())["environment"]["target"])
    assert own and target == tmp_path / "run" / "target"
    assert target.is_dir() and not any(target.iterdir())


def test_it_aims_every_kill_at_work_that_remains() -> None:
    # Against progress, not wall time: whatever the seed and however many kills are left, the
    # target generation is one the uninterrupted run had not finished yet.
    for seed in range(200):
        schedule = KillSchedule(kills=5, generations=6, seconds_per_generation=0.2, rng=random.Random(seed))
        for generation in range(6):
            target, delay = schedule.next_kill(generation=generation)
            assert generation <= target <= max(generation, 5)
            assert 0.0 <= delay <= 0.2


@pytest.mark.slow
def test_it_passes_the_quick_mode_on_this_database(long_task: Path, tmp_path: Path) -> None:
    report = _chaos(long_task, tmp_path, "--runs", "3", "--kills", "2", "--recoverers", "3")

    assert (report["returncode"], report["violations"], report["completed"]) == (0, [], 3)
    assert report["success_rate"] == 1.0 and report["duplicates"] == 0
    assert report["kills_delivered"] == report["kills_requested"] == 6


@pytest.mark.postgres
@SLOW_MACHINE
def test_it_passes_the_quick_mode_on_postgres(long_task: Path, tmp_path: Path) -> None:
    report = _chaos(long_task, tmp_path, "--runs", "2", "--kills", "2", "--recoverers", "3")

    assert (report["returncode"], report["violations"], report["completed"]) == (0, [], 2)
    assert report["success_rate"] == 1.0 and report["duplicates"] == 0
    assert report["kills_delivered"] == report["kills_requested"] == 4


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
    done = run_manage("chaos", str(tmp_path / "nope.toml"))

    assert done.returncode == 2
    assert "set-up error: no task spec" in done.stderr
