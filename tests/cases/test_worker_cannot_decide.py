"""A worker holds only the public keys of the reviewer root: a decision it mints is refused and the
run stays frozen, so whoever runs a worker cannot resolve a case (DESIGN.md sections 2.2 and 6.3)."""

from __future__ import annotations

import pytest

from runtime.core.checkpoint import SignedDecision
from runtime.decisions.reviews import case_decide
from runtime.models import IdempotencyRecord, TraceEvent
from tests.evidence.support import run_forger, worker_env

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_refuses_a_decision_minted_by_a_worker(conflict, tmp_path):
    child = run_forger("decision", "--case-id", conflict.case_id, env=worker_env(tmp_path))
    assert child.returncode == 0, child.stderr
    outcomes = {e["attempt"]: e for e in child.events}
    assert outcomes["decision_sign_for"]["error"] == "KeyringError"
    assert outcomes["signer_for"]["error"] == "KeyringError"
    for name in ("forged_decision_0", "forged_decision_1"):
        forged = SignedDecision.model_validate(outcomes[name]["decision"], strict=False)
        outcome = case_decide(decision=forged)
        assert not outcome.applied
        assert outcome.reason == "tampered decision: the signature does not verify"
    assert conflict.phase() == "needs_review"
    assert not IdempotencyRecord.objects.filter(idempotency_key=conflict.key, quarantined=True).exists()
    assert TraceEvent.objects.filter(run_id=conflict.run_id, event_type="review.refused").count() == 2
