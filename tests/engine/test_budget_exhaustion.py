"""Story: a run whose budget runs out stops before the next write, not in the middle of one.

Budgets (DESIGN.md section 3) are checked before a proposal is recorded: the write that would
exceed the budget is never proposed, so it has no intent, no key and no effect. The writes that
fit the budget each have exactly one effect.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from tests.engine.support import (
    WORKSPACE_STEPS,
    journal_effects,
    restore,
    run_target,
    trace_events,
    write_scripted_task,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_stops_as_failed_before_the_write_that_exceeds_the_budget(tmp_path: Path) -> None:
    task = write_scripted_task(tmp_path, WORKSPACE_STEPS, budget=2)
    run_id = run_start(spec_path=task)

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("failed", "budget_exhausted")
    assert report.cursor == 2
    effects = journal_effects(run_target(run_id))
    assert sorted(effects.values()) == [1, 1]
    assert len(trace_events(run_id, "intent.proposed")) == 2
    state = restore(run_id).state
    assert state.pending is None and (state.usage.proposals, state.usage.steps) == (2, 2)
    assert trace_events(run_id, "run.budget_exhausted")[0]["reason"] == "budget_exhausted"
