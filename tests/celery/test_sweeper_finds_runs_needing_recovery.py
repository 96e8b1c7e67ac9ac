"""Story: the sweeper finds exactly the live runs nobody is driving (DESIGN.md section 4).

An operator's fleet has runs in every state. The sweeper must re-queue the live ones
(``running``/``pending``) whose worker's lease expired -- judged by the database clock, whatever
the clocks of the machines say -- and the live ones whose lease is free and that nobody touched
for a while. It must leave alone runs a worker is driving, runs frozen for a human, finished
runs, a run whose restore failed closed, and a run that keeps dying at the same generation.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import time_machine
from django.db import models
from django.db.models import ExpressionWrapper
from django.db.models.functions import Now

from runtime.checkpoints.protocol import run_create
from runtime.evidence.trace import trace_append
from runtime.models import Run
from runtime.workers.sweeper import RecoveryCandidate, lease_expiry_next, runs_needing_recovery
from runtime.workers.tasks import advance_run, advance_runs, sweep_expired_leases
from tests.factories import make_state

pytestmark = pytest.mark.django_db


def db_time(seconds: float) -> ExpressionWrapper:
    """The database clock plus ``seconds`` (negative: in the past)."""
    return ExpressionWrapper(Now() + timedelta(seconds=seconds),
                             output_field=models.DateTimeField())


def a_run(*, phase: str = "running", owner: str = "", lease_in: float | None = None,
          touched: float = -3600.0) -> str:
    """A run in ``phase``; ``owner`` holds a lease expiring ``lease_in`` seconds from now (DB
    clock); the row last changed ``touched`` seconds from now."""
    state = make_state()
    run_create(state=state, worker="celery@creator:1", ttl_seconds=30)
    run_id = state.identity.run_id
    Run.objects.filter(run_id=run_id).update(
        phase=phase, owner_worker=owner,
        lease_expires_at=None if lease_in is None else db_time(lease_in),
        updated_at=db_time(touched),
    )
    return run_id


def found(**kwargs: float) -> dict[str, str]:
    return {c.run_id: c.reason for c in runs_needing_recovery(**kwargs)}


def test_it_finds_live_runs_whose_worker_lease_expired() -> None:
    crashed_running = a_run(owner="celery@dead:1", lease_in=-5)
    crashed_pending = a_run(phase="pending", owner="celery@dead:2", lease_in=-5)
    driven = a_run(owner="celery@alive:1", lease_in=+25)

    assert found() == {crashed_running: "expired", crashed_pending: "expired"}
    assert driven not in found()


def test_it_finds_free_live_runs_only_once_nobody_touched_them_for_a_while() -> None:
    forgotten = a_run(touched=-60)
    between_two_tasks = a_run(touched=-1)

    assert found(idle_seconds=10) == {forgotten: "idle"}
    assert found(idle_seconds=0) == {forgotten: "idle", between_two_tasks: "idle"}


@pytest.mark.parametrize("phase", ["awaiting_approval", "needs_review", "completed", "failed",
                                   "cancelled"])
def test_it_leaves_frozen_and_finished_runs_alone(phase: str) -> None:
    a_run(phase=phase, owner="celery@dead:1", lease_in=-5)
    a_run(phase=phase)

    assert found() == {}


def test_it_judges_expiry_by_the_database_clock_not_the_workers() -> None:
    driven = a_run(owner="celery@alive:1", lease_in=+25)
    crashed = a_run(owner="celery@dead:1", lease_in=-5)

    # A sweeper machine whose clock runs a day fast (or slow) sees exactly the same.
    with time_machine.travel(timedelta(days=1)):
        assert found() == {crashed: "expired"}
    with time_machine.travel(-timedelta(days=1)):
        assert found() == {crashed: "expired"}
    assert driven not in found()


def test_it_leaves_a_run_whose_restore_failed_closed_to_a_human() -> None:
    run_id = a_run(owner="celery@dead:1", lease_in=-5)
    trace_append(run_id=run_id, event_type="recovery.failed",
                 payload={"error": "HighWaterMarkMissingError"})
    assert found() == {}

    # An operator repairs it and resumes by hand; from then on it is swept like any other run.
    trace_append(run_id=run_id, event_type="lease.acquired", payload={"worker": "operator"})
    Run.objects.filter(run_id=run_id).update(lease_expires_at=db_time(-1))
    assert found() == {run_id: "expired"}


def test_it_stops_requeueing_a_run_that_keeps_dying_at_one_generation() -> None:
    run_id = a_run(owner="celery@dead:1", lease_in=-5)
    generation = Run.objects.get(run_id=run_id).generation
    for _ in range(2):
        trace_append(run_id=run_id, event_type="recovery.succeeded",
                     payload={"generation": generation, "duration_seconds": 0.1})
    trace_append(run_id=run_id, event_type="recovery.succeeded",
                 payload={"generation": generation - 1, "duration_seconds": 0.1})
    assert found() == {run_id: "expired"}

    trace_append(run_id=run_id, event_type="recovery.succeeded",
                 payload={"generation": generation, "duration_seconds": 0.1})
    Run.objects.filter(run_id=run_id).update(lease_expires_at=db_time(-1))
    assert found() == {}
    assert found(max_recoveries=4) == {run_id: "expired"}


def test_it_reports_what_it_found_oldest_first() -> None:
    newer = a_run(owner="celery@dead:1", lease_in=-5, touched=-10)
    older = a_run(touched=-100)

    assert runs_needing_recovery(idle_seconds=30) == [
        RecoveryCandidate(run_id=older, generation=1, reason="idle", owner_worker=""),
        RecoveryCandidate(run_id=newer, generation=1, reason="expired",
                          owner_worker="celery@dead:1"),
    ]
    assert [c.run_id for c in runs_needing_recovery(idle_seconds=30, limit=1)] == [older]


def test_it_rejects_nonsense_arguments() -> None:
    with pytest.raises(ValueError):
        runs_needing_recovery(idle_seconds=-1)
    with pytest.raises(ValueError):
        runs_needing_recovery(limit=0)
    with pytest.raises(ValueError):
        runs_needing_recovery(max_recoveries=0)


def test_the_sweep_task_enqueues_each_candidate_on_commit_with_its_generation(
    settings, django_capture_on_commit_callbacks
) -> None:
    settings.RATCHET_SWEEP_SECONDS = 30
    crashed = a_run(owner="celery@dead:1", lease_in=-5)
    forgotten = a_run(touched=-100)
    a_run(touched=-1)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert sweep_expired_leases() == 2

    assert {cb.func for cb in callbacks} == {advance_run.apply_async}
    assert sorted(cb.keywords["args"] for cb in callbacks) == sorted([(crashed, 1), (forgotten, 1)])


def test_it_hands_a_large_backlog_out_in_batches_naming_each_generation(
    settings, django_capture_on_commit_callbacks, monkeypatch
) -> None:
    settings.RATCHET_SWEEP_SECONDS = 30
    monkeypatch.setattr("runtime.workers.tasks.SWEEP_MESSAGES", 2)
    orphans = [a_run(owner="celery@dead:1", lease_in=-5) for _ in range(5)]

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert sweep_expired_leases() == 5

    assert {cb.func for cb in callbacks} == {advance_runs.apply_async}
    batches = [cb.keywords["args"][0] for cb in callbacks]
    assert [len(batch) for batch in batches] == [3, 2]
    assert sorted(run_id for batch in batches for run_id, _ in batch) == sorted(orphans)
    assert {generation for batch in batches for _, generation in batch} == {1}


def test_it_says_when_the_next_live_lease_expires_by_the_database_clock() -> None:
    a_run(owner="celery@slow:1", lease_in=+40)
    a_run(owner="celery@dead:1", lease_in=-5)  # already expired: a candidate now, not later
    a_run(phase="awaiting_approval", owner="celery@x:1", lease_in=+1)
    soon = a_run(owner="celery@busy:1", lease_in=+4)

    wait = lease_expiry_next(within_seconds=30)

    assert wait is not None and 2.0 < wait <= 4.0
    Run.objects.filter(run_id=soon).update(lease_expires_at=db_time(+35))
    assert lease_expiry_next(within_seconds=30) is None
    with pytest.raises(ValueError):
        lease_expiry_next(within_seconds=0)


def test_it_sweeps_again_just_after_the_next_lease_expires(
    settings, django_capture_on_commit_callbacks
) -> None:
    """DESIGN.md section 5.7: a dead worker's runs are found as their leases expire, not a beat
    period later; the follow-up carries its chain's deadline (the next periodic sweep)."""
    settings.RATCHET_SWEEP_SECONDS = 30
    a_run(owner="celery@dying:1", lease_in=+3)

    before = time.time()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert sweep_expired_leases() == 0

    assert [cb.func for cb in callbacks] == [sweep_expired_leases.apply_async]
    follow_up = callbacks[0].keywords
    assert 2.0 < follow_up["countdown"] <= 3.5
    assert before + 29 <= follow_up["kwargs"]["until"] <= time.time() + 30


def test_it_leaves_a_later_expiry_to_the_next_periodic_sweep(
    settings, django_capture_on_commit_callbacks
) -> None:
    settings.RATCHET_SWEEP_SECONDS = 30
    a_run(owner="celery@slow:1", lease_in=+45)
    a_run(owner="celery@dying:1", lease_in=+3)

    with django_capture_on_commit_callbacks(execute=False) as beyond_period:
        sweep_expired_leases(until=time.time() + 1.0)  # a follow-up whose chain ends sooner

    assert beyond_period == []
    Run.objects.filter(owner_worker="celery@dying:1").update(lease_expires_at=db_time(+50))
    with django_capture_on_commit_callbacks(execute=False) as only_slow:
        sweep_expired_leases()
    assert only_slow == []
