"""Story: a run whose restore fails closed while nobody crashed (N6, DESIGN.md section 5.7).

Before, such a restore (a MAC that does not verify, a missing checkpoint row, a mark mismatch)
traced nothing when the lease was free, so the sweeper re-queued the run every period and no
person was told. Now the first refusal is traced as ``restore.refused`` (not a failed recovery:
nobody crashed, so the recovery metrics are unchanged) as the run's newest event, and the sweeper
leaves the run alone; only a person's resume tries again, and meets the same typed error.
"""

from __future__ import annotations

import pytest

from runtime.engine import run_advance, run_start
from runtime.errors import CheckpointError
from runtime.models import Checkpoint, Run, TraceEvent
from runtime.workers.sweeper import runs_needing_recovery

pytestmark = pytest.mark.django_db(transaction=True)


def _events(run_id: str, event_type: str) -> int:
    return TraceEvent.objects.filter(run_id=run_id, event_type=event_type).count()


def test_a_restore_that_fails_closed_is_traced_and_no_longer_swept(replay_task) -> None:
    run_id = run_start(spec_path=replay_task)
    run_advance(run_id=run_id, max_steps=1)  # a clean stop: the lease is released
    committed = Run.objects.get(run_id=run_id)
    Checkpoint.objects.filter(run_id=run_id, generation=committed.generation).delete()
    assert [c.run_id for c in runs_needing_recovery()] == [run_id]

    with pytest.raises(CheckpointError):
        run_advance(run_id=run_id, worker="worker-b")
    with pytest.raises(CheckpointError):
        run_advance(run_id=run_id, worker="worker-c")

    assert _events(run_id, "restore.refused") == 2  # one per attempt, each the newest event
    assert _events(run_id, "recovery.failed") == 0
    assert runs_needing_recovery() == []
    newest = TraceEvent.objects.filter(run_id=run_id).order_by("-seq").first()
    assert newest.event_type == "restore.refused" and newest.payload["error"]
