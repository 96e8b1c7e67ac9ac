"""Story: a resumed orphan spends no transaction of its own on starting the recovery or on
giving its lease up at the end (DESIGN.md sections 4.3 and 5.7).

``recovery.started`` rides in the lease acquisition that found a previous owner, and a commit
into a terminal phase releases the lease in its own fenced UPDATE, so an orphan with one write
to finish costs: the acquisition, the trace's re-hash under the run row's lock (a recovery checks
the whole trace, DESIGN.md section 4.15), ``recovery.succeeded``, and three checkpoint advances
(intent, receipt, completion), each one main transaction and the mark's. Counted, not timed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from runtime.models import Run, TraceEvent
from runtime.ownership.leases import lease_acquire
from tests.engine.support import write_scripted_task
from tests.helpers.db_counts import db_counting

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

ONE_WRITE = [{"target": "result.txt", "content": "written once\n"}]


def _one_write_task(directory: Path) -> Path:
    return write_scripted_task(directory, ONE_WRITE, files={"result.txt": "written once\n"})


def _event_types(run_id: str) -> list[str]:
    return list(TraceEvent.objects.filter(run_id=run_id).order_by("seq").values_list("event_type", flat=True))


def _orphan(tmp_path: Path) -> str:
    run_id = run_start(spec_path=_one_write_task(tmp_path / "orphan"))
    lease_acquire(run_id=run_id, worker="dead-worker", ttl_seconds=0.2)
    time.sleep(0.4)  # the dead worker's lease expires by the database clock
    return run_id


def test_an_orphan_with_one_write_left_resumes_in_six_main_transactions_and_three_of_the_mark(tmp_path: Path):
    run_id = _orphan(tmp_path)

    with db_counting() as counts:
        report = run_advance(run_id=run_id, worker="rescuer")

    assert (report.phase, report.recovered) == ("completed", True)
    assert (counts.transactions, counts.mark_transactions) == (6, 3), counts.sql
    events = _event_types(run_id)
    taken = len(events) - 1 - events[::-1].index("lease.acquired")
    assert events[taken:taken + 2] == ["lease.acquired", "recovery.started"]
    assert events[-3:] == ["run.completed", "checkpoint.committed", "lease.released"]
    run = Run.objects.get(run_id=run_id)
    assert (run.owner_worker, run.lease_expires_at) == ("", None)


def test_a_clean_resume_traces_no_recovery(tmp_path: Path):
    run_id = run_start(spec_path=_one_write_task(tmp_path / "clean"))

    report = run_advance(run_id=run_id, worker="worker-a")

    assert (report.phase, report.recovered) == ("completed", False)
    assert "recovery.started" not in _event_types(run_id)


def test_a_run_that_stops_before_its_end_still_gives_its_lease_up(tmp_path: Path):
    run_id = run_start(spec_path=_one_write_task(tmp_path / "steps"))

    report = run_advance(run_id=run_id, worker="worker-a", max_steps=1)

    assert report.phase == "pending"
    assert _event_types(run_id)[-1] == "lease.released"
    assert Run.objects.get(run_id=run_id).owner_worker == ""
