"""Story: a worker is SIGKILLed mid-step; the sweeper re-queues the run and it finishes with one
commit per Idempotency-Key (DESIGN.md section 5 crash table, section 8 metrics).

The kill lands at ``engine.after_execute``: git already holds the write's commit, nothing in the
database says so. Whatever the broker does with the message in hand (Redis keeps it invisible
for the visibility timeout, the SQLite broker never gives it back, a prefork pool rejects it back
to the queue), the run's lease expires by the database clock, the sweeper re-queues it, and the
recovering worker finds the commit by its key and reconciles it instead of writing it again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.engine import run_start
from runtime.models import Run, TraceEvent
from runtime.observability.stats import recovery_stats
from tests.celery.conftest import SOURCE_COMMITS
from tests.celery.support import Worker, expected_transport, wait_for_phase
from tests.engine.support import key_effects
from tests.helpers.procs import KILLED

pytestmark = pytest.mark.django_db(transaction=True)

DONE = ("completed", "failed", "cancelled", "needs_review", "awaiting_approval")
CRASH_ON_SECOND_WRITE = {"RATCHET_CRASH_AT": "engine.after_execute:2"}


def events(run_id: str, event_type: str) -> list[dict]:
    return list(TraceEvent.objects.filter(run_id=run_id, event_type=event_type)
                .order_by("seq").values_list("payload", flat=True))


def executed_keys(run_id: str) -> list[str]:
    return [p["idempotency_key"] for p in TraceEvent.objects.filter(
        run_id=run_id, event_type__in=("write.executed", "write.reconciled")
    ).order_by("seq").values_list("payload", flat=True)]


def target_of(run_id: str) -> Path:
    return Path(Run.objects.get(run_id=run_id).spec["target"])


def test_it_recovers_a_run_whose_worker_was_sigkilled_mid_step(
    replay_task: Path, workers: Callable[..., Worker], send: Callable[..., None]
) -> None:
    run_id = run_start(spec_path=replay_task)
    doomed = workers(name="doomed", pool="solo", env=CRASH_ON_SECOND_WRITE)

    send("ratchet.advance_run", run_id)

    assert doomed.wait_exit(timeout=90) == KILLED
    run = Run.objects.get(run_id=run_id)
    assert run.phase == "pending" and run.owner_worker.startswith("doomed@")
    # Git has the second write; the database only knows about the first.
    assert len(key_effects(target_of(run_id))) == 2
    assert len(executed_keys(run_id)) == 1

    rescuer = workers(name="rescuer", beat=True)
    assert rescuer.transport().startswith(expected_transport())

    assert wait_for_phase(run_id, DONE, timeout=120, workers=[doomed, rescuer]) == "completed"
    keys = executed_keys(run_id)
    assert len(keys) == SOURCE_COMMITS
    assert key_effects(target_of(run_id)) == {key: 1 for key in keys}
    assert [p["idempotency_key"] for p in events(run_id, "write.reconciled")] == [keys[1]]
    takeovers = [p for p in events(run_id, "lease.acquired") if p["previous_owner"]]
    assert takeovers[0]["previous_owner"] == run.owner_worker
    assert takeovers[0]["worker"].startswith("rescuer@")
    # The rescuer gets the run from its start-up sweep or from the dead worker's unacknowledged
    # message coming back, whichever the broker hands out first; either way through a message.
    output = rescuer.output()
    assert "sweep: re-queueing run " + run_id in output or "Task ratchet.advance_run[" in output
    stats = recovery_stats(run_ids=[run_id])
    assert (stats.recoveries, stats.success_rate, stats.duplicate_submissions) == (1, 1.0, 0)
    assert stats.audited_runs == 1


def test_it_recovers_when_pool_processes_keep_dying_mid_step(
    replay_task: Path, workers: Callable[..., Worker], send: Callable[..., None]
) -> None:
    """Every pool process of this worker dies at its second write; the worker replaces it, the
    message comes back (reject on worker lost) or the sweeper re-queues the run, and each
    recovery reconciles the write its predecessor made."""
    run_id = run_start(spec_path=replay_task)
    worker = workers(name="flaky", beat=True, env=CRASH_ON_SECOND_WRITE)
    assert worker.transport().startswith(expected_transport())

    send("ratchet.advance_run", run_id)

    assert wait_for_phase(run_id, DONE, timeout=180, workers=[worker]) == "completed"
    log = worker.output()
    assert "signal 9 (SIGKILL)" in log
    keys = executed_keys(run_id)
    assert len(keys) == SOURCE_COMMITS
    assert key_effects(target_of(run_id)) == {key: 1 for key in keys}
    reconciled = events(run_id, "write.reconciled")
    stats = recovery_stats(run_ids=[run_id])
    assert stats.recoveries >= 1 and len(reconciled) >= 1
    assert (stats.success_rate, stats.duplicate_submissions, stats.audited_runs) == (1.0, 0, 1)
