"""Trusted replan resumes with a new key; trusted abort fails the run with the evidence kept."""

import pytest

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.checkpoint import ReviewCaseStatus
from runtime.core.ledger import state_ledger
from runtime.decisions.reviews import case_decide
from runtime.engine import run_advance
from runtime.errors import UnknownKeyError
from runtime.models import IdempotencyRecord, ReviewCase, TraceEvent
from tests.helpers.keys import make_test_key

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_completes_a_replanned_run_with_a_new_key_and_the_old_key_quarantined(conflict):
    outcome = case_decide(decision=conflict.sign("replan"))
    assert outcome.applied and outcome.phase == "running"
    report = run_advance(run_id=conflict.run_id, worker="worker-b")
    assert report.phase == "completed"
    state = checkpoint_verify(run_id=conflict.run_id).state
    assert state_ledger(state).key_quarantined(conflict.key)
    assert state_ledger(state).executed(conflict.key) is None
    assert state.replan_epoch == 1
    assert (conflict.workspace / "a.txt").read_text() == "A\n"
    assert IdempotencyRecord.objects.get(idempotency_key=conflict.key).quarantined
    case = ReviewCase.objects.get(case_id=conflict.case_id)
    assert case.status == "replanned" and case.decided_by == "rita"
    assert case.sealed["receipt"]["idempotency_key"] == conflict.key
    assert case.sealed["pending"]["idempotency_key"] == conflict.key
    assert TraceEvent.objects.filter(run_id=conflict.run_id, event_type="review.replanned").exists()


def test_it_fails_an_aborted_run_and_keeps_the_evidence(conflict):
    outcome = case_decide(decision=conflict.sign("abort", reviewer="rex"))
    assert outcome.applied and outcome.phase == "failed"
    state = checkpoint_verify(run_id=conflict.run_id).state
    assert state.stop_reason.value == "aborted_by_reviewer"
    assert state.pending is not None and state.pending.idempotency_key == conflict.key
    [ref] = state.review_cases
    assert ref.status == ReviewCaseStatus.ABORTED and ref.decision.reviewer == "rex"
    assert ref.receipt is not None and ref.receipt_fingerprint == ref.receipt.fingerprint()
    run_advance(run_id=conflict.run_id, worker="worker-b")
    assert not (conflict.workspace / "b.txt").exists()


def test_it_fails_closed_when_restoring_a_decided_run_without_the_reviewer_trust_root(conflict, monkeypatch):
    case_decide(decision=conflict.sign("replan"))
    monkeypatch.setenv("RATCHET_REVIEWER_PUBLIC_KEYS", make_test_key("reviewer", "someone-else").public_spec)
    with pytest.raises(UnknownKeyError):
        run_advance(run_id=conflict.run_id, worker="worker-b")
