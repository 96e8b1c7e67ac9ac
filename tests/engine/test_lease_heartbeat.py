"""Story: a lease heartbeat keeps the lease through one long adapter call (DESIGN.md section 4.9).

A real child process drives the write step of a run whose adapter call takes three times the
lease's time to live; meanwhile another worker keeps trying to take the lease and never gets it.
When the heartbeat loses the lease, the new holder finishes the write and the slow worker's call
is refused by the fence: one effect, no second write.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db.models.functions import Now

from runtime.engine import run_advance
from runtime.errors import LeaseHeldError
from runtime.models import ReviewCase, Run
from runtime.ownership.leases import lease_acquire
from tests.engine.slow_calls import pending_run, spawn_slow_worker, wait_for_the_call
from tests.engine.support import journal_effects, run_target, trace_events
from tests.helpers.procs import events

pytestmark = pytest.mark.django_db(transaction=True)


def _keeps_its_lease(tmp_path: Path, *, ttl: float, call: float) -> None:
    run_id = pending_run(tmp_path)
    markers = tmp_path / "markers"
    child = spawn_slow_worker(run_id, ttl=ttl, call=call, markers=markers)
    wait_for_the_call(child, markers)

    first_expiry = Run.objects.values_list("lease_expires_at", flat=True).get(run_id=run_id)
    refused_at = []
    # Another worker tries to take the run over for as long as the call runs (after it, the
    # slow worker commits and releases the lease, which anyone may then take).
    while not (markers / "writing").exists() and child.poll() is None:
        with pytest.raises(LeaseHeldError):
            lease_acquire(run_id=run_id, worker="thief", ttl_seconds=ttl)
        refused_at.append(Run.objects.annotate(now=Now()).values_list("now", flat=True).get(run_id=run_id))
        time.sleep(ttl / 4)
    stdout, stderr = child.communicate(timeout=max(120, call))

    assert child.returncode == 0, stderr
    (report,) = events(stdout)
    assert report["outcome"] == "stepped" and report["phase"] == "running", report
    # Refused even after the lease the call started with had run out by the database clock.
    assert max(refused_at) > first_expiry
    assert list(journal_effects(run_target(run_id)).values()) == [1]
    assert [e["worker"] for e in trace_events(run_id, "lease.acquired")].count("thief") == 0
    assert trace_events(run_id, "fence.refused") == []


def test_it_keeps_the_lease_through_a_call_three_times_the_lease_ttl(tmp_path: Path) -> None:
    _keeps_its_lease(tmp_path, ttl=2.0, call=6.0)


@pytest.mark.slow
def test_a_two_minute_adapter_call_keeps_its_lease(tmp_path: Path) -> None:
    _keeps_its_lease(tmp_path, ttl=10.0, call=120.0)


def test_a_lost_heartbeat_ends_in_a_fenced_refusal_not_a_write(tmp_path: Path) -> None:
    run_id = pending_run(tmp_path)
    markers = tmp_path / "markers"
    child = spawn_slow_worker(run_id, ttl=2.0, call="go", markers=markers)
    wait_for_the_call(child, markers)
    # The slow worker's renewals stop reaching the database (a partition, a long pause): its
    # lease runs out by the database clock and its next heartbeat finds it lost.
    Run.objects.filter(run_id=run_id).update(lease_expires_at=Now() - timedelta(seconds=1))

    taken = run_advance(run_id=run_id, worker="new-holder", ttl_seconds=30, wait_seconds=10)
    (markers / "go").touch()
    stdout, stderr = child.communicate(timeout=120)

    assert taken.phase == "completed", taken
    assert (markers / "writing").exists()  # the slow call did try to write, after the takeover
    assert child.returncode == 0, stderr
    assert events(stdout) == [{"outcome": "error", "error": "LeaseLostError"}]
    assert list(journal_effects(run_target(run_id)).values()) == [1]
    (refused,) = trace_events(run_id, "fence.refused")
    assert refused["worker"] == "slow-worker" and refused["fencing_token"] < refused["newest_seen"]
    assert not ReviewCase.objects.filter(run_id=run_id).exists()
