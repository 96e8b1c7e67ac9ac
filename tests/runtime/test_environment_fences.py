"""Fencing tokens come from one counter per environment (DESIGN.md section 4.6).

Two runs on one environment instance draw their lease versions from the same counter, in the
lease transaction: two processes taking leases at the same time are never handed the same token,
and every token is newer than anything issued on the environment before.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runtime.models import EnvironmentRegistration, Run
from runtime.ownership.leases import lease_acquire, lease_release
from tests.helpers.procs import ROOT, child_env, events

pytestmark = pytest.mark.django_db(transaction=True)

TIMES = 15


def test_two_runs_on_one_environment_draw_from_one_counter(start_run) -> None:
    (_, first_a), (_, first_b) = start_run(run_id="run-a"), start_run(run_id="run-b")

    later_a = lease_acquire(run_id="run-a", worker="worker-a", ttl_seconds=30)

    assert first_b.lease.lease_version > first_a.lease.lease_version
    assert later_a.lease_version > first_b.lease.lease_version
    assert EnvironmentRegistration.objects.get(instance_id="env-1").fencing_token == later_a.lease_version
    lease_release(lease=later_a)


def test_another_environment_has_its_own_counter(start_run) -> None:
    start_run(run_id="run-a")
    start_run(run_id="run-b")
    (_, other) = start_run(run_id="run-c", instance_id="env-2")

    assert other.lease.lease_version == 1


def test_a_new_counter_starts_above_every_lease_an_older_run_holds(start_run) -> None:
    start_run(run_id="run-a")
    Run.objects.filter(run_id="run-a").update(lease_version=41, owner_worker="")
    EnvironmentRegistration.objects.filter(instance_id="env-1").delete()  # as before the upgrade

    (_, second) = start_run(run_id="run-b")

    assert second.lease.lease_version == 42


def test_two_processes_taking_leases_on_one_environment_never_share_a_token(start_run, tmp_path: Path) -> None:
    start_run(run_id="run-a")
    start_run(run_id="run-b")
    for run_id in ("run-a", "run-b"):
        Run.objects.filter(run_id=run_id).update(owner_worker="", lease_expires_at=None)
    go = tmp_path / "go"
    children = [subprocess.Popen([sys.executable, "-m", "tests.runtime.child_take_leases", run_id, f"w-{run_id}",
                                  str(TIMES), str(go)], env=child_env(), cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
                for run_id in ("run-a", "run-b")]
    go.touch()
    outputs = [child.communicate(timeout=300) for child in children]

    tokens = []
    for child, (stdout, stderr) in zip(children, outputs, strict=True):
        assert child.returncode == 0, stderr
        (report,) = events(stdout)
        assert report["tokens"] == sorted(report["tokens"])
        tokens += report["tokens"]
    assert len(tokens) == len(set(tokens)) == 2 * TIMES
    assert EnvironmentRegistration.objects.get(instance_id="env-1").fencing_token == max(tokens)
