"""Approval expiry is not corruption: expired evidence loads, never executes, and can be refreshed."""

import time

import pytest

from runtime.adapters.workspace.adapter import WorkspaceAdapter
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.checkpoint import StopReason
from runtime.core.ledger import state_ledger
from runtime.decisions.approvals import approval_grant, approval_refresh
from runtime.engine import run_advance
from runtime.errors import ApprovalRefusedError
from runtime.models import TraceEvent

pytestmark = pytest.mark.django_db(transaction=True)


def _expire(story):
    item = story.waiting()
    approval_grant(run_id=story.run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint,
                   ttl_seconds=0.5)
    time.sleep(0.8)
    return item


def test_expired_approval_treated_as_corruption_or_auto_executed_after_load(story):
    item = _expire(story)
    report = run_advance(run_id=story.run_id, worker="worker-b")
    assert report.phase == "awaiting_approval"
    assert report.stop_reason == StopReason.APPROVAL_EXPIRED.value
    assert not (story.workspace / "limits.toml").exists()
    assert story.effects_for(item.idempotency_key) == 0
    # The checkpoint still verifies and still carries the expired evidence for the operator.
    state = checkpoint_verify(run_id=story.run_id).state
    assert state.pending.approval is not None
    assert state.pending.approval.approver == "olivia"
    assert story.waiting().approval_state == "expired"


def test_it_refuses_a_refresh_bound_to_a_stale_environment(story):
    item = _expire(story)
    run_advance(run_id=story.run_id, worker="worker-b")
    stale = item.environment_fingerprint
    (story.workspace / "notes.txt").write_text("changed after the approval expired\n")
    with pytest.raises(ApprovalRefusedError):
        approval_refresh(run_id=story.run_id, approver="olivia", environment_fingerprint=stale)
    # Even quoting the new fingerprint is refused: it is not the state the action was planned on.
    current = WorkspaceAdapter(story.workspace).observe().state_fingerprint
    with pytest.raises(ApprovalRefusedError, match="no longer matches"):
        approval_refresh(run_id=story.run_id, approver="olivia", environment_fingerprint=current)
    assert not (story.workspace / "limits.toml").exists()


def test_it_executes_a_refreshed_approval_exactly_once(story):
    item = _expire(story)
    run_advance(run_id=story.run_id, worker="worker-b")
    outcome = approval_refresh(run_id=story.run_id, approver="oscar",
                               environment_fingerprint=item.environment_fingerprint)
    assert outcome.outcome == "refreshed"
    refreshed = TraceEvent.objects.get(run_id=story.run_id, event_type="approval.refreshed")
    assert refreshed.payload["sealed"]["approver"] == "olivia"  # old evidence sealed into the trace
    assert refreshed.payload["approval"]["approver"] == "oscar"
    report = run_advance(run_id=story.run_id, worker="worker-b")
    assert report.phase == "completed"
    assert story.effects_for(item.idempotency_key) == 1
    state = checkpoint_verify(run_id=story.run_id).state
    assert state_ledger(state).executed_writes()[-1].receipt.approval_digest is not None
