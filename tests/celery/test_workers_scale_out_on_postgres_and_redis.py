"""Story: ``celery -A runtime worker`` scales out across machines against one PostgreSQL.

Two workers with different node names (two machines, as far as Celery and the leases can tell)
share one Redis broker and one PostgreSQL database; one of them also runs the sweeper. Several
replays are enqueued at once. They interleave across both workers a step at a time, every run
completes, and every Idempotency-Key has exactly one commit in its repository.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.engine import run_start
from runtime.models import Run, TraceEvent
from runtime.observability.stats import recovery_stats
from tests.celery.support import Worker, wait_for_phase
from tests.engine.support import key_effects

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

RUNS = 8
"""More runs than the first worker can hold at once (its two pool processes and their prefetch
slots): with one commit per write a run is over in a few steps, so with fewer runs the first
worker to be ready could take every message before the second one asked."""


def test_it_spreads_runs_over_two_workers_with_one_effect_per_key(
    tmp_path: Path, replay_task: Path, workers: Callable[..., Worker], send: Callable[..., None]
) -> None:
    run_ids = [run_start(spec_path=replay_task) for _ in range(RUNS)]
    one_step = {"RATCHET_STEPS_PER_TASK": "1"}
    east = workers(name="east", beat=True, env=one_step)
    west = workers(name="west", env=one_step)

    for run_id in run_ids:
        send("ratchet.advance_run", run_id)

    for run_id in run_ids:
        assert wait_for_phase(run_id, ("completed", "failed", "needs_review"), timeout=180,
                              workers=[east, west]) == "completed"
    for run_id in run_ids:
        effects = key_effects(Path(Run.objects.get(run_id=run_id).spec["target"]))
        assert len(effects) == 5 and set(effects.values()) == {1}
    nodes = {payload["worker"].split("@")[0] for payload in TraceEvent.objects.filter(
        run_id__in=run_ids, event_type="lease.acquired").values_list("payload", flat=True)}
    assert {"east", "west"} <= nodes
    assert recovery_stats(run_ids=run_ids).duplicate_submissions == 0
