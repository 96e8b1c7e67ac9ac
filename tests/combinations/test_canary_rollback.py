"""Story: a canary combination that produces a duplicate submission is rolled back automatically
where the admission gate checks; its in-flight runs are listed; runs pinned to the old
combination keep running, on the old combination's queue (DESIGN.md sections 8.3 and 8.4).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings

from runtime.engine import run_advance, run_start
from runtime.errors import AdmissionClosedError, CombinationStateError
from runtime.evidence.trace import trace_append
from runtime.models import CombinationEvent
from runtime.rollout.combinations import (
    combination_get,
    combination_of_run,
    combination_promote,
    combination_queue,
    combination_register,
    combination_regress_record,
)
from runtime.workers.dispatch import run_queue
from tests.engine.support import trace_events, write_scripted_task

pytestmark = pytest.mark.django_db(transaction=True)


def _start(tmp_path: Path, name: str) -> str:
    return run_start(spec_path=write_scripted_task(tmp_path / name))


def _canary(run_id: str, *, share: float) -> str:
    fields = dict(combination_of_run(run_id=run_id).fields, code_version="canary-build")
    return combination_register(fields=fields, state="canary", share=share, actor="ops",
                                reason="new build").combination_id


def test_it_rolls_back_a_canary_that_produced_a_duplicate(tmp_path: Path) -> None:
    old_run = _start(tmp_path, "old")
    old = combination_of_run(run_id=old_run)
    assert old.state == "active"
    canary = _canary(old_run, share=1.0)

    done, in_flight = _start(tmp_path, "done"), _start(tmp_path, "in-flight")
    assert {combination_of_run(run_id=r).combination_id for r in (done, in_flight)} == {canary}
    assert run_queue(run_id=in_flight) == combination_queue(canary)
    assert run_queue(run_id=old_run) == settings.CELERY_TASK_DEFAULT_QUEUE
    assert run_advance(run_id=done).phase == "completed"
    run_advance(run_id=in_flight, max_steps=1)
    # The canary's completed run is found to have submitted one write twice.
    trace_append(run_id=done, event_type="audit.effects", payload={"keys": 5, "duplicates": 1, "missing": []})

    with pytest.raises(AdmissionClosedError):
        _start(tmp_path, "refused")

    rolled = combination_get(combination_id=canary)
    assert (rolled.state, rolled.share) == ("rolled_back", 0.0)
    entry = CombinationEvent.objects.get(combination=rolled, kind="rolled_back")
    assert entry.actor == "admission" and "duplicate" in entry.reason
    assert [r["run_id"] for r in entry.payload["in_flight"]] == [in_flight]
    assert trace_events(in_flight, "combination.rolled_back")[0]["combination_id"] == canary
    # The run pinned to the old combination keeps running.
    assert run_advance(run_id=old_run).phase == "completed"
    assert combination_get(combination_id=old.combination_id).state == "active"


def test_it_sends_new_runs_to_the_active_combination_after_a_rollback(tmp_path: Path, settings) -> None:
    settings.RATCHET_ADMISSION_MAX_DUPLICATES = 100  # the gate itself stays open
    first = _start(tmp_path, "first")
    canary = _canary(first, share=1.0)
    on_canary = _start(tmp_path, "canary")
    assert run_advance(run_id=on_canary).phase == "completed"
    trace_append(run_id=on_canary, event_type="audit.effects", payload={"keys": 5, "duplicates": 1, "missing": []})

    after = _start(tmp_path, "after")

    assert combination_get(combination_id=canary).state == "rolled_back"
    assert combination_of_run(run_id=after).combination_id == combination_of_run(run_id=first).combination_id


def test_it_promotes_a_canary_only_with_enough_runs_and_a_passing_regress(tmp_path: Path, settings) -> None:
    settings.RATCHET_CANARY_MIN_RUNS = 1
    first = _start(tmp_path, "first")
    old = combination_of_run(run_id=first).combination_id
    canary = _canary(first, share=1.0)

    with pytest.raises(CombinationStateError) as refused:
        combination_promote(combination_id=canary, actor="ops", reason="looks fine")
    assert "0 completed canary runs" in str(refused.value) and "regress" in str(refused.value)

    assert run_advance(run_id=_start(tmp_path, "canary")).phase == "completed"
    combination_regress_record(combination_id=canary, passed=True, results=[])
    promoted = combination_promote(combination_id=canary, actor="ops", reason="held over 1 run")

    assert (promoted.state, promoted.share) == ("active", 1.0)
    assert combination_get(combination_id=old).state == "retired"
    assert [e.kind for e in CombinationEvent.objects.filter(combination_id=canary).order_by("id")] == [
        "registered", "regress.passed", "promoted"]
    assert run_queue(run_id=first) == combination_queue(old)  # in flight on the old code's workers


def test_it_gives_a_canary_no_runs_at_share_zero(tmp_path: Path) -> None:
    first = _start(tmp_path, "first")
    _canary(first, share=0.0)

    runs = [_start(tmp_path, f"r{n}") for n in range(3)]

    assert {combination_of_run(run_id=r).state for r in runs} == {"active"}
