"""Story: what ``advance_run`` does with each message it is handed, in the worker's own code path
(``advance_run_once``, called in-process: no broker, no eager mode).

A message that would do harm is dropped and acknowledged, never retried: an outdated duplicate
(the run moved past the generation it names), one that arrives while another worker holds the
lease, one for a frozen or finished run, and one whose restore fails closed (DESIGN.md
section 4: a missing high-water mark needs a human, not a retry loop). A message that drives the
run re-enqueues it, on commit, naming the generation it reached.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from runtime.models import HighWaterMark, Run, TraceEvent
from runtime.ownership.leases import lease_acquire
from runtime.workers.tasks import advance_run, advance_run_once, advance_runs, worker_id

pytestmark = pytest.mark.django_db

WORKER = "celery@test-host:4242"


def lease_events(run_id: str) -> int:
    return TraceEvent.objects.filter(run_id=run_id, event_type="lease.acquired").count()


def test_it_drops_a_duplicate_that_names_an_outdated_generation(replay_task: Path) -> None:
    run_id = run_start(spec_path=replay_task)
    run_advance(run_id=run_id, max_steps=2)
    before = Run.objects.values("generation", "lease_version").get(run_id=run_id)

    outcome = advance_run_once(run_id=run_id, generation=before["generation"] - 1, worker=WORKER)

    assert outcome == "stale"
    assert Run.objects.values("generation", "lease_version").get(run_id=run_id) == before


def test_it_drops_a_message_while_another_worker_holds_the_lease(replay_task: Path) -> None:
    run_id = run_start(spec_path=replay_task)
    lease_acquire(run_id=run_id, worker="celery@other-host:7", ttl_seconds=30)
    acquisitions = lease_events(run_id)

    outcome = advance_run_once(run_id=run_id, generation=None, worker=WORKER)

    assert outcome == "lease-held"
    run = Run.objects.get(run_id=run_id)
    assert (run.owner_worker, run.generation) == ("celery@other-host:7", 1)
    assert lease_events(run_id) == acquisitions


def test_it_leaves_a_finished_run_alone(replay_task: Path) -> None:
    run_id = run_start(spec_path=replay_task)
    assert run_advance(run_id=run_id, worker=WORKER).phase == "completed"
    acquisitions = lease_events(run_id)

    assert advance_run_once(run_id=run_id, generation=None, worker=WORKER) == "not-live"
    assert lease_events(run_id) == acquisitions


@pytest.mark.parametrize("phase", ["awaiting_approval", "needs_review", "completed", "failed",
                                   "cancelled"])
def test_it_never_drops_a_live_run_whose_row_was_edited_to_look_done(replay_task: Path, phase: str) -> None:
    # The row is an unsigned copy (DESIGN.md section 4.10): confirmed against the signed checkpoint,
    # the disagreement goes to a person instead of silently stopping the run.
    run_id = run_start(spec_path=replay_task)
    Run.objects.filter(run_id=run_id).update(phase=phase)
    acquisitions = lease_events(run_id)

    assert advance_run_once(run_id=run_id, generation=None, worker=WORKER) == "needs-human"
    assert lease_events(run_id) == acquisitions
    refused = TraceEvent.objects.filter(run_id=run_id, event_type="restore.refused").get()
    assert refused.payload["error"] == "DerivedRowMismatchError"


def test_it_does_not_retry_a_restore_that_failed_closed(
    replay_task: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run_id = run_start(spec_path=replay_task)
    HighWaterMark.objects.filter(run_id=run_id).delete()

    outcome = advance_run_once(run_id=run_id, generation=1, worker=WORKER)

    assert outcome == "needs-human"
    assert f"run {run_id} cannot be restored and needs a human" in caplog.text
    assert Run.objects.get(run_id=run_id).generation == 1


def test_it_names_the_unknown_run_it_drops(caplog: pytest.LogCaptureFixture) -> None:
    assert advance_run_once(run_id="no-such-run", generation=None, worker=WORKER) == "unknown-run"
    assert "run no-such-run does not exist" in caplog.text


def test_it_drives_a_batch_and_re_enqueues_on_commit_with_the_new_generation(
    replay_task: Path, settings, django_capture_on_commit_callbacks
) -> None:
    settings.RATCHET_STEPS_PER_TASK = 3
    run_id = run_start(spec_path=replay_task)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        outcome = advance_run_once(run_id=run_id, generation=1, worker=WORKER)

    run = Run.objects.get(run_id=run_id)
    assert outcome == "continued"
    assert (run.generation, run.owner_worker) == (4, "")
    assert len(callbacks) == 1
    continuation = callbacks[0]
    assert continuation.func == advance_run.apply_async
    assert continuation.keywords == {"args": (run_id, 4)}


def test_it_gives_every_pool_process_its_own_lease_identity(settings) -> None:
    """Leases are re-entrant for their holder, so two pool processes must never share an id."""
    assert worker_id(advance_run) == f"{socket.gethostname()}:{os.getpid()}"
    settings.RATCHET_WORKER_ID = "rack-7"
    assert worker_id(advance_run) == f"rack-7:{os.getpid()}"
    # Under the threads pool every thread is a holder of its own.
    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.append(worker_id(advance_run)))
    thread.start()
    thread.join()
    assert seen[0].startswith(f"rack-7:{os.getpid()}:") and seen[0] != f"rack-7:{os.getpid()}"


def test_it_drives_each_run_of_a_batch_once_even_when_the_batch_comes_twice(
    replay_task: Path, settings
) -> None:
    settings.RATCHET_STEPS_PER_TASK = 1000
    # each run is driven to its end in one task however loaded the machine: no time slice
    settings.RATCHET_TASK_SLICE_SECONDS = settings.RATCHET_TASK_MAX_SECONDS = 600.0
    first, second = run_start(spec_path=replay_task), run_start(spec_path=replay_task)
    batch = [[first, 1], [second, 1]]

    assert advance_runs.run(batch) == {"completed": 2}
    driven = {r: (Run.objects.get(run_id=r).generation, lease_events(r)) for r in (first, second)}
    assert advance_runs.run(batch) == {"not-live": 2}

    assert {r: (Run.objects.get(run_id=r).generation, lease_events(r))
            for r in (first, second)} == driven
