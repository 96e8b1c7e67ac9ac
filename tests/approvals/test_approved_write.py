"""An approved write executes exactly once, bound to the environment the approver saw."""

import pytest

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.ledger import state_ledger
from runtime.decisions.approvals import approval_grant
from runtime.engine import run_advance
from runtime.errors import ApprovalRefusedError
from runtime.models import TraceEvent

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_executes_exactly_once_after_approval(story):
    item = story.waiting()
    outcome = approval_grant(run_id=story.run_id, approver="olivia",
                             environment_fingerprint=item.environment_fingerprint)
    assert outcome.outcome == "granted"
    report = run_advance(run_id=story.run_id, worker="worker-a")
    assert report.phase == "completed"
    assert (story.workspace / "limits.toml").read_text() == "max_orders = 3\n"
    assert story.effects_for(item.idempotency_key) == 1
    run_advance(run_id=story.run_id, worker="worker-b")
    assert story.effects_for(item.idempotency_key) == 1
    state = checkpoint_verify(run_id=story.run_id).state
    [approved] = [w for w in state_ledger(state).executed_writes() if w.idempotency_key == item.idempotency_key]
    assert approved.receipt.approval_digest is not None
    granted = TraceEvent.objects.get(run_id=story.run_id, event_type="approval.granted")
    assert granted.payload["approver"] == "olivia"


def test_it_refuses_an_approval_for_an_environment_the_approver_did_not_see(story):
    (story.workspace / "notes.txt").write_text("edited behind the run's back\n")
    item = story.waiting()
    with pytest.raises(ApprovalRefusedError, match="changed since you looked"):
        approval_grant(run_id=story.run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)
    assert TraceEvent.objects.filter(run_id=story.run_id, event_type="approval.refused").exists()
    assert not (story.workspace / "limits.toml").exists()
