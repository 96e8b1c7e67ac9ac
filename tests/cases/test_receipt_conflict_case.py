"""A receipt conflict freezes the run and opens a case that keeps all the evidence."""

import pytest

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.engine import run_advance
from runtime.models import ReviewCase

pytestmark = pytest.mark.django_db(transaction=True)


def test_deleting_the_pending_intent_on_a_conflict(conflict):
    state = checkpoint_verify(run_id=conflict.run_id).state
    assert state.pending is not None and state.pending.idempotency_key == conflict.key
    case = ReviewCase.objects.get(case_id=conflict.case_id)
    assert case.pending["intent_digest"] == state.pending.intent_digest
    assert case.receipt["idempotency_key"] == conflict.key
    assert case.receipt["intent_digest"] != state.pending.intent_digest
    assert case.receipt_fingerprint.startswith("sha256:")
    assert case.environment["version"] == state.environment.version
    assert any(e["type"] == "intent.proposed" for e in case.trace_excerpt)
    # No new proposals and no execution while frozen.
    report = run_advance(run_id=conflict.run_id, worker="worker-b")
    assert report.phase == "needs_review" and report.steps == 0
    assert conflict.effects_for(conflict.key) == 1  # only the rogue write
