"""Story: a worker dies holding runs; a fresh worker picks them up as their leases expire, without
waiting for beat, and spreads them over its pool (DESIGN.md section 5.7).

Beat is off and its period is an hour in these stories, so the only sweeps are the one every
worker sends when it is ready and the follow-ups a sweep schedules for the next lease expiry:
if the runs complete, those found them. Ordering and counts are asserted, never seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.engine import run_start
from runtime.models import Run, TraceEvent
from runtime.ownership.leases import lease_acquire
from tests.celery.support import Worker, wait_for_phase
from tests.engine.support import key_effects
from tests.factories import write_scripted_task
from tests.helpers.procs import KILLED

pytestmark = pytest.mark.django_db(transaction=True)

DONE = ("completed", "failed", "cancelled", "needs_review", "awaiting_approval")
NO_BEAT = {"RATCHET_SWEEP_SECONDS": "3600"}
DEAD = "celery@dead-host:1"


def sweep_lines(log: str, text: str) -> list[str]:
    """Lines of the worker's own log format mentioning ``text`` (the runtime logger's console
    handler prints each message a second time)."""
    return [line for line in log.splitlines() if line.startswith("[") and text in line]


def takeovers(run_id: str, previous: str | None = None) -> list[dict]:
    events = TraceEvent.objects.filter(run_id=run_id, event_type="lease.acquired").order_by("seq")
    return [p for p in events.values_list("payload", flat=True)
            if p.get("previous_owner") and (previous is None or p["previous_owner"] == previous)]


def test_it_picks_up_a_killed_workers_run_when_its_lease_expires_without_beat(
    replay_task: Path, workers: Callable[..., Worker], send: Callable[..., None]
) -> None:
    run_id = run_start(spec_path=replay_task)
    # A lease long enough to outlive the rescuer's start-up: its first sweep finds nothing
    # expired and must schedule the next one for the moment the lease runs out.
    doomed = workers(name="doomed", pool="solo",
                     env={**NO_BEAT, "RATCHET_LEASE_SECONDS": "14",
                          "RATCHET_CRASH_AT": "engine.after_execute:2"})
    send("ratchet.advance_run", run_id)
    assert doomed.wait_exit(timeout=90) == KILLED
    dead_owner = Run.objects.get(run_id=run_id).owner_worker
    assert dead_owner.startswith("doomed@")

    rescuer = workers(name="rescuer", beat=False, env=NO_BEAT)

    assert wait_for_phase(run_id, DONE, timeout=120, workers=[doomed, rescuer]) == "completed"
    log = rescuer.output()
    assert "beat: Starting..." not in log
    looked_ahead = log.find("sweep: next lease expires in")
    requeued = log.find(f"sweep: re-queueing run {run_id}")
    assert 0 <= looked_ahead < requeued
    assert len(sweep_lines(log, f"sweep: re-queueing run {run_id}")) == 1
    [takeover] = takeovers(run_id)
    assert takeover["previous_owner"] == dead_owner and takeover["worker"].startswith("rescuer@")
    assert set(key_effects(Path(Run.objects.get(run_id=run_id).spec["target"])).values()) == {1}


def test_it_hands_a_dead_workers_runs_to_every_pool_process_once_each(
    tmp_path: Path, workers: Callable[..., Worker]
) -> None:
    run_ids = []
    for n in range(6):
        spec = write_scripted_task(tmp_path / f"run-{n}", steps=[
            {"target": "a.txt", "content": f"a {n}\n"}, {"target": "b.txt", "content": f"b {n}\n"}])
        run_ids.append(run_start(spec_path=spec, worker="creator"))
    for run_id in run_ids:  # what a worker SIGKILLed while holding them leaves behind
        lease_acquire(run_id=run_id, worker=DEAD, ttl_seconds=0.5)
    time.sleep(0.6)

    worker = workers(name="rescuer", concurrency=2, beat=False, env=NO_BEAT)

    for run_id in run_ids:
        assert wait_for_phase(run_id, DONE, timeout=120, workers=[worker]) == "completed"
    log = worker.output()
    for run_id in run_ids:
        assert len(sweep_lines(log, f"sweep: re-queueing run {run_id}")) == 1
        assert len(takeovers(run_id, previous=DEAD)) == 1
        assert TraceEvent.objects.filter(run_id=run_id, event_type="recovery.succeeded").count() == 1
    drivers = {takeovers(run_id, previous=DEAD)[0]["worker"] for run_id in run_ids}
    assert len(drivers) == 2  # both pool processes took runs: one message per run, in parallel
