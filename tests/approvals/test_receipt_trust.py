"""A receipt of an approval-gated write is trusted only when it binds an approval this run issued
and committed before that approval expired; anything else goes to review (the
cases a mutation check found untested; DESIGN.md sections 6.2 and 6.4)."""

from __future__ import annotations

import pytest

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.checkpoint import Action
from runtime.core.evidence import approval_digest, approval_sign
from runtime.core.signing import TrustRoot
from runtime.database.clock import db_now
from runtime.decisions.approvals import approval_grant
from runtime.engine import run_advance
from runtime.keys import signer_for
from runtime.models import Run, TraceEvent
from tests.helpers.procs import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _write_with(story, item, digest):
    """The adapter commits the pending write now, bound to ``digest`` (a slow adapter call)."""
    return story.adapter().execute(
        Action.model_validate(item.action, strict=False), idempotency_key=item.idempotency_key,
        intent_digest=item.intent_digest, fencing_token=Run.objects.get(run_id=story.run_id).lease_version,
        blobs=lambda d: b"max_orders = 3\n", approval_digest=digest)


def _review_detail(story) -> str:
    state = checkpoint_verify(run_id=story.run_id).state
    assert state.phase.value == "needs_review" and state.stop_reason.value == "untrusted_receipt"
    assert not TraceEvent.objects.filter(run_id=story.run_id, event_type="write.reconciled").exists()
    return state.stop_detail


def test_it_sends_a_receipt_committed_after_its_approval_expired_to_review(story):
    item = story.waiting()
    granted = approval_grant(run_id=story.run_id, approver="olivia",
                             environment_fingerprint=item.environment_fingerprint, ttl_seconds=1)
    approval = checkpoint_verify(run_id=story.run_id).state.pending.approval
    wait_for(lambda: db_now() > granted.expires_at, timeout=30, what="the approval to expire")
    receipt = _write_with(story, item, approval_digest(approval))
    assert receipt.committed_at > approval.expires_at
    assert run_advance(run_id=story.run_id, worker="worker-b").phase == "needs_review"
    assert "the write committed after its approval had expired" in _review_detail(story)


def test_it_sends_a_receipt_bound_to_an_approval_the_run_never_issued_to_review(story):
    item = story.waiting()
    approval_grant(run_id=story.run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)
    issued = checkpoint_verify(run_id=story.run_id).state.pending.approval
    # Genuinely signed, for the same write, but never given to this run.
    other = approval_sign(keyring=signer_for(TrustRoot.APPROVAL), run_id=story.run_id,
                          idempotency_key=item.idempotency_key, intent_digest=item.intent_digest,
                          environment_instance_id=issued.environment_instance_id,
                          environment_fingerprint=issued.environment_fingerprint,
                          environment_version=issued.environment_version, approver="olivia", ttl_seconds=600)
    assert approval_digest(other) != approval_digest(issued)
    _write_with(story, item, approval_digest(other))
    assert run_advance(run_id=story.run_id, worker="worker-b").phase == "needs_review"
    assert "receipt is bound to an approval this run never issued" in _review_detail(story)
