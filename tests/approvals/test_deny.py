"""Deny and stop ends the pending action without a side effect and records why, signed (DESIGN.md section 6.14)."""

import pytest

from runtime.bundles.export import bundle_export
from runtime.bundles.verification import bundle_verify
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.denial_evidence import denial_verify
from runtime.core.ledger import state_ledger
from runtime.core.signing import TrustRoot
from runtime.decisions.denials import approval_deny
from runtime.engine import run_advance
from runtime.errors import ApprovalRefusedError
from runtime.keys import keyring_for
from runtime.models import TraceEvent
from tests.engine.support import restore

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


def test_a_stop_denial_is_signed_kept_in_the_ledger_and_in_the_bundle(story):
    item = story.waiting()
    outcome = approval_deny(run_id=story.run_id, approver="olivia", reason="not this quarter", mode="stop",
                            environment_fingerprint=item.environment_fingerprint, intent_digest=item.intent_digest)
    assert (outcome.outcome, outcome.phase) == ("denied", "failed")
    state = restore(story.run_id).state
    denial = state_ledger(state).denied(item.idempotency_key)
    assert (denial.mode.value, denial.approver, denial.environment_fingerprint) == (
        "stop", "olivia", item.environment_fingerprint)
    denial_verify(denial, keyring_for(TrustRoot.APPROVAL, create=False))
    denied = TraceEvent.objects.get(run_id=story.run_id, event_type="approval.denied")
    assert denied.payload["denial"] == denial.model_dump(mode="json")
    assert bundle_verify(bundle_export(run_id=story.run_id, exported_by="auditor")) == []


def test_a_denial_for_another_action_is_refused(story):
    item = story.waiting()
    with pytest.raises(ApprovalRefusedError, match="not the one you looked at"):
        approval_deny(run_id=story.run_id, approver="olivia", reason="no", intent_digest="sha256:" + "0" * 64)
    assert restore(story.run_id).state.phase.value == "awaiting_approval"
    assert story.effects_for(item.idempotency_key) == 0
