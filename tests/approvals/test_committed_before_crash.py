"""Approval after a write that committed before a crash only reconciles (DESIGN.md section 6)."""

import time

import pytest

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.checkpoint import Action
from runtime.core.ledger import state_ledger
from runtime.database.clock import db_now
from runtime.decisions.approvals import approval_grant
from runtime.engine import run_advance
from runtime.models import Run, TraceEvent
from tests.helpers.procs import KILLED, child_env, run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_only_reconciles_a_write_that_committed_before_the_crash(story):
    item = story.waiting()
    # Valid long enough for a loaded machine to start the worker child and reach the write: the
    # child is stopped at its crash point first, and only then does the test let the approval
    # expire, judged by the database clock (the one every expiry check reads).
    granted = approval_grant(run_id=story.run_id, approver="olivia",
                             environment_fingerprint=item.environment_fingerprint, ttl_seconds=30)
    # A worker executes the approved write and is SIGKILLed before recording anything.
    crashed = run_manage("resume", story.run_id, "--no-progress",
                         env=child_env(RATCHET_CRASH_AT="engine.after_execute", RATCHET_LEASE_SECONDS="1"))
    assert crashed.returncode == KILLED, crashed.stderr
    assert (story.workspace / "limits.toml").exists()
    deadline = time.monotonic() + 120
    while db_now() <= granted.expires_at and time.monotonic() < deadline:
        time.sleep(0.5)
    assert db_now() > granted.expires_at, "the approval did not expire by the database clock"
    report = run_advance(run_id=story.run_id, worker="worker-b", wait_seconds=5)
    assert report.phase == "completed"
    assert story.effects_for(item.idempotency_key) == 1
    assert TraceEvent.objects.filter(run_id=story.run_id, event_type="write.reconciled").count() == 1
    state = checkpoint_verify(run_id=story.run_id).state
    assert state.pending is None
    assert state_ledger(state).executed_writes()[-1].reconciled is True


def test_it_sends_a_receipt_without_approval_binding_to_review(story):
    """Trust boundary: a receipt that does not bind the approval cannot be reconciled as approved."""
    from runtime.evidence.attachments import attachment_put

    item = story.waiting()
    digest = attachment_put(data=b"max_orders = 3\n")
    # Another caller that can reach the adapter writes with the pending key, without an approval.
    story.adapter().execute(
        Action.model_validate(item.action, strict=False), idempotency_key=item.idempotency_key,
        intent_digest=item.intent_digest, fencing_token=Run.objects.get(run_id=story.run_id).lease_version,
        blobs=lambda d: b"max_orders = 3\n",
    )
    assert digest == item.action["params"]["content"]
    report = run_advance(run_id=story.run_id, worker="worker-b")
    assert report.phase == "needs_review"
    assert report.stop_reason == "untrusted_receipt"
    assert not TraceEvent.objects.filter(run_id=story.run_id, event_type="write.reconciled").exists()
