"""A SIGKILL between amending and executing never runs the original, nor the amended action twice
(DESIGN.md sections 5.3 and 6.13). The amending process and the workers are real children."""

from __future__ import annotations

import time

import pytest

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.decisions.amendments import approval_amend, proposed_arguments
from runtime.engine import run_advance
from runtime.errors import LeaseHeldError
from runtime.models import TraceEvent
from tests.helpers.procs import KILLED, child_env, run_manage

pytestmark = pytest.mark.django_db(transaction=True)

AMENDED = "max_orders = 2\n"


def _amend_in_child(story, *, crash_at: str):
    item = story.waiting()
    return item, run_manage("approvals", "amend", story.run_id, "--approver", "olivia",
                            "--fingerprint", item.environment_fingerprint, "--intent", item.intent_digest,
                            "--set", f"content={AMENDED}",
                            "--note", "finance caps it at 2",
                            env=child_env(RATCHET_CRASH_AT=crash_at, RATCHET_LEASE_SECONDS="1"))


def _advance(run_id: str):
    """Advance once the dead child's one-second lease has lapsed (judged by the runtime's own check)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            return run_advance(run_id=run_id, worker="worker-b", wait_seconds=5)
        except LeaseHeldError:
            if time.monotonic() > deadline:
                raise


def test_a_kill_after_the_amend_commit_then_after_the_write_runs_the_amended_action_once(story):
    item, amended = _amend_in_child(story, crash_at="decisions.after_amend_commit")
    assert amended.returncode == KILLED, amended.stderr
    pending = checkpoint_verify(run_id=story.run_id).state.pending
    assert pending.intent_digest != item.intent_digest and pending.approval is not None
    assert not (story.workspace / "limits.toml").exists()

    crashed = run_manage("resume", story.run_id, "--no-progress",
                         env=child_env(RATCHET_CRASH_AT="engine.after_execute", RATCHET_LEASE_SECONDS="1"))
    assert crashed.returncode == KILLED, crashed.stderr
    assert (story.workspace / "limits.toml").read_text() == AMENDED

    report = _advance(story.run_id)

    assert report.phase == "completed"
    assert (story.workspace / "limits.toml").read_text() == AMENDED
    receipts = [r for r in story.adapter().receipts() if r.idempotency_key == item.idempotency_key]
    assert [r.intent_digest for r in receipts] == [pending.intent_digest]  # one effect, the amended intent
    assert TraceEvent.objects.filter(run_id=story.run_id, event_type="write.reconciled").count() == 1
    assert TraceEvent.objects.filter(run_id=story.run_id, event_type="intent.amended").count() == 1


def test_a_kill_before_the_amend_commit_leaves_the_original_waiting_untouched(story):
    item, amended = _amend_in_child(story, crash_at="decisions.before_amend_commit")
    assert amended.returncode == KILLED, amended.stderr
    assert story.waiting().intent_digest == item.intent_digest
    assert not TraceEvent.objects.filter(run_id=story.run_id, event_type="intent.amended").exists()

    resumed = _advance(story.run_id)  # a worker finds nothing approved: the original keeps waiting
    assert resumed.phase == "awaiting_approval"
    assert not (story.workspace / "limits.toml").exists() and story.effects_for(item.idempotency_key) == 0

    _, arguments = proposed_arguments(run_id=story.run_id)
    approval_amend(run_id=story.run_id, approver="olivia", arguments={**arguments, "content": AMENDED},
                   proposed_intent_digest=item.intent_digest, environment_fingerprint=item.environment_fingerprint)
    assert _advance(story.run_id).phase == "completed"
    assert (story.workspace / "limits.toml").read_text() == AMENDED
    assert story.effects_for(item.idempotency_key) == 1
