"""Story: an operator cancels a run; the pending write is settled by key first (DESIGN.md sections 6 and 8).

``run_request_cancel`` only sets a flag; the worker driving the run acts on it at its next
step. A pending write is never abandoned blindly: the engine asks the adapter for the key's
receipt. No receipt -- the write never ran, the intent is dropped (and kept in the trace), the
run ends ``cancelled`` with no effect for it. A receipt -- the write landed (here: the request
was also delivered directly) -- it is reconciled and recorded, then the run is cancelled. No
new write starts after the request either way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.core.ledger import state_ledger
from runtime.decisions.cancellation import run_request_cancel
from runtime.engine import run_advance, run_start
from tests.engine.support import (
    execute_outside,
    journal_effects,
    restore,
    run_target,
    trace_events,
    trace_types,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_cancels_a_pending_write_that_never_ran_without_an_effect(workspace_task: Path) -> None:
    run_id = run_start(spec_path=workspace_task)
    # one write done and, in the same commit, the second one proposed (one commit per write,
    # DESIGN.md section 4.13): the second is pending
    run_advance(run_id=run_id, max_steps=2)
    pending = restore(run_id).state.pending

    run_request_cancel(run_id=run_id, requested_by="operator@example.org")
    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("cancelled", "cancelled")
    effects = journal_effects(run_target(run_id))
    assert len(effects) == 1 and pending.idempotency_key not in effects
    (cancelled,) = trace_events(run_id, "run.cancelled")
    assert cancelled["dropped_pending"]["idempotency_key"] == pending.idempotency_key
    assert trace_events(run_id, "run.cancel_requested")[0]["requested_by"] == "operator@example.org"
    assert run_advance(run_id=run_id).steps == 0


def test_it_reconciles_a_pending_write_that_landed_before_cancelling(workspace_task: Path) -> None:
    run_id = run_start(spec_path=workspace_task)
    run_advance(run_id=run_id, max_steps=1)
    pending = restore(run_id).state.pending
    receipt = execute_outside(run_id)

    run_request_cancel(run_id=run_id, requested_by="operator@example.org")
    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("cancelled", "cancelled")
    assert journal_effects(run_target(run_id)) == {pending.idempotency_key: 1}
    state = restore(run_id).state
    assert [w.receipt for w in state_ledger(state).executed_writes()] == [receipt] and state.pending is None
    types = trace_types(run_id)
    assert types.index("write.reconciled") < types.index("run.cancelled")
    assert "intent.proposed" not in types[types.index("run.cancel_requested"):]
