"""Deny ends the pending action without a side effect and records why."""

import pytest

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.decisions.denials import approval_deny
from runtime.engine import run_advance
from runtime.models import TraceEvent

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_ends_the_action_without_a_side_effect(story):
    item = story.waiting()
    outcome = approval_deny(run_id=story.run_id, approver="olivia", reason="limits are owned by finance")
    assert outcome.phase == "failed"
    run_advance(run_id=story.run_id, worker="worker-b")
    assert not (story.workspace / "limits.toml").exists()
    assert story.effects_for(item.idempotency_key) == 0
    denied = TraceEvent.objects.get(run_id=story.run_id, event_type="approval.denied")
    assert denied.payload["reason"] == "limits are owned by finance"
    assert denied.payload["pending"]["idempotency_key"] == item.idempotency_key
    state = checkpoint_verify(run_id=story.run_id).state
    assert state.stop_reason.value == "approval_denied"
