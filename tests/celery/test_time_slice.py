"""Story: a worker keeps a run while it works and hands it back only when others wait.

One ``advance_run`` task holds the run's lease and restored session for as long as the run has
steps (DESIGN.md section 5.7): a run alone on the fleet finishes in one task, with one lease
acquisition and one restore; when another live run waits for a worker, the task hands its run
back after its time slice; and after ``RATCHET_TASK_MAX_SECONDS`` it hands it back whatever
waits. Driven in-process through the worker's own code path (``advance_run_once``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.engine import run_start
from runtime.models import Run, TraceEvent
from runtime.workers.tasks import TimeSlice, advance_run_once

pytestmark = pytest.mark.django_db

WORKER = "celery@slice-host:7"


def acquisitions(run_id: str) -> int:
    return TraceEvent.objects.filter(run_id=run_id, event_type="lease.acquired").count()


class Ticks:
    """A clock that moves only when told to (seconds)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_it_drives_a_run_alone_on_the_fleet_to_the_end_in_one_task(replay_task: Path, settings) -> None:
    settings.RATCHET_STEPS_PER_TASK = None
    settings.RATCHET_TASK_SLICE_SECONDS = 0.001  # it looks after every step, and nothing waits
    run_id = run_start(spec_path=replay_task)
    before = acquisitions(run_id)

    outcome = advance_run_once(run_id=run_id, generation=1, worker=WORKER)

    run = Run.objects.get(run_id=run_id)
    assert outcome == "completed" and run.phase == "completed"
    assert run.generation > 3
    assert acquisitions(run_id) - before == 1


def test_it_hands_its_run_back_after_its_slice_when_another_run_waits(
    replay_task: Path, settings, django_capture_on_commit_callbacks
) -> None:
    settings.RATCHET_STEPS_PER_TASK = None
    settings.RATCHET_TASK_SLICE_SECONDS = 0.001
    busy, waiting = run_start(spec_path=replay_task), run_start(spec_path=replay_task)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        outcome = advance_run_once(run_id=busy, generation=1, worker=WORKER)

    run = Run.objects.get(run_id=busy)
    assert outcome == "continued"
    assert (run.generation, run.owner_worker) == (2, "")
    assert [c.keywords["args"] for c in callbacks] == [(busy, 2)]
    assert Run.objects.get(run_id=waiting).generation == 1


def test_it_keeps_stepping_within_its_slice_even_when_others_wait(replay_task: Path) -> None:
    busy, _waiting = run_start(spec_path=replay_task), run_start(spec_path=replay_task)
    clock = Ticks()
    rule = TimeSlice(run_id=busy, slice_seconds=2.0, max_seconds=60.0, clock=clock)

    clock.now += 1.9
    assert rule() is True
    clock.now += 0.2
    assert rule() is False


def test_it_keeps_stepping_past_its_slice_while_nothing_waits_and_stops_at_the_maximum(replay_task: Path) -> None:
    alone = run_start(spec_path=replay_task)
    clock = Ticks()
    rule = TimeSlice(run_id=alone, slice_seconds=2.0, max_seconds=60.0, clock=clock)

    for _ in range(29):
        clock.now += 2.0
        assert rule() is True
    clock.now += 2.0
    assert rule() is False


def test_it_does_not_count_a_run_another_worker_holds_as_waiting(replay_task: Path) -> None:
    busy, held = run_start(spec_path=replay_task), run_start(spec_path=replay_task)
    from runtime.ownership.leases import lease_acquire

    lease_acquire(run_id=held, worker="celery@other-host:9", ttl_seconds=30)
    clock = Ticks()
    rule = TimeSlice(run_id=busy, slice_seconds=2.0, max_seconds=60.0, clock=clock)

    clock.now += 2.5
    assert rule() is True
