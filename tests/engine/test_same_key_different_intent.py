"""Story: the adapter holds a receipt for the pending key but for a different intent (DESIGN.md section 6.3).

Something executed *another* write under the key the run derived for its pending write -- a
bug, a replayed request with changed parameters, another caller reusing the key. The adapter
keeps that commit; the engine must not call it success. It freezes the run in needs_review with
reason ``receipt_conflict``, keeps the pending intent in the committed checkpoint next to the
full conflicting receipt, opens a review case, and refuses new proposals and execution until a
reviewer decides.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.core.checkpoint import Action
from runtime.core.ledger import state_ledger
from runtime.engine import run_advance, run_start
from runtime.evidence.attachments import attachment_put
from runtime.models import Run
from tests.engine.support import (
    execute_outside,
    key_effects,
    keyed_commits,
    restore,
    run_target,
    trace_events,
    trace_types,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _conflicting_write(run_id: str):
    """Execute a different commit under the pending write's key, straight at the adapter."""
    pending = restore(run_id).state.pending
    other = Action(kind="commit", target="", params={
        "message": "Not what the plan said\n", "author_name": "Mallory",
        "author_email": "mallory@example.org", "author_date": "2024-05-01T00:00:00+00:00",
        "changes": [{"op": "write", "path": "intruder.txt",
                     "content": attachment_put(data=b"other parameters\n"), "executable": False}],
    })
    assert other.intent_digest() != pending.intent_digest
    receipt = execute_outside(run_id, other)
    return pending, receipt


def _frozen_run(replay_task: Path):
    run_id = run_start(spec_path=replay_task)
    assert run_advance(run_id=run_id, max_steps=1).phase == "pending"
    pending, receipt = _conflicting_write(run_id)
    report = run_advance(run_id=run_id)
    return run_id, pending, receipt, report


def test_it_does_not_return_success_for_the_same_key_with_different_parameters(
    replay_task: Path,
) -> None:
    run_id, pending, receipt, report = _frozen_run(replay_task)

    assert (report.phase, report.stop_reason) == ("needs_review", "receipt_conflict")
    assert "write.reconciled" not in trace_types(run_id)
    assert "write.executed" not in trace_types(run_id)
    assert state_ledger(restore(run_id).state).executed_writes() == []


def test_it_does_not_delete_the_pending_intent_on_a_conflict(
    replay_task: Path,
) -> None:
    run_id, pending, receipt, _ = _frozen_run(replay_task)

    state = restore(run_id).state
    assert state.phase == "needs_review"
    assert state.pending == pending
    (case,) = state.review_cases
    assert case.reason == "receipt_conflict"
    assert (case.idempotency_key, case.intent_digest) == (pending.idempotency_key,
                                                          pending.intent_digest)
    assert case.receipt == receipt and case.receipt_fingerprint == receipt.fingerprint()
    (opened,) = trace_events(run_id, "review.opened")
    assert opened["reason"] == "receipt_conflict"
    assert opened["receipt"]["intent_digest"] == receipt.intent_digest
    assert opened["pending"]["intent_digest"] == pending.intent_digest


def test_it_refuses_new_proposals_and_execution_while_frozen(replay_task: Path) -> None:
    run_id, pending, receipt, _ = _frozen_run(replay_task)
    target = run_target(run_id)
    keys_before = keyed_commits(target)
    generation = Run.objects.get(run_id=run_id).generation

    again = run_advance(run_id=run_id)

    assert (again.phase, again.steps) == ("needs_review", 0)
    assert Run.objects.get(run_id=run_id).generation == generation
    assert keyed_commits(target) == keys_before
    assert trace_events(run_id, "intent.proposed")[-1]["idempotency_key"] == pending.idempotency_key
    assert len(trace_events(run_id, "intent.proposed")) == 1
    # Executing the planned write directly under the conflicted key gets the conflicting
    # receipt back and writes nothing: one key, one business result.
    direct = execute_outside(run_id)
    assert direct == receipt
    assert key_effects(target) == {pending.idempotency_key: 1}


def test_it_freezes_on_a_conflicting_workspace_receipt_too(workspace_task: Path) -> None:
    run_id = run_start(spec_path=workspace_task)
    run_advance(run_id=run_id, max_steps=1)
    pending = restore(run_id).state.pending
    other = Action(kind="write_file", target="elsewhere.txt",
                   params={"content": attachment_put(data=b"different parameters\n")})
    receipt = execute_outside(run_id, other)

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("needs_review", "receipt_conflict")
    state = restore(run_id).state
    assert state.pending == pending and state.review_cases[-1].receipt == receipt
    assert not (run_target(run_id) / pending.action.target).exists()
