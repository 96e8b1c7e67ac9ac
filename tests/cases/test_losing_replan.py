"""A replan that loses the race to an abort quarantines nothing: the key quarantine is written in
the replan's own commit transaction (DESIGN.md section 6.3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import runtime.decisions.reviews
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.ledger import state_ledger
from runtime.decisions.reviews import CP_BEFORE_DECISION_COMMIT, case_decide
from runtime.errors import LeaseLostError, StaleGenerationError
from runtime.models import IdempotencyRecord, Run

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_quarantines_no_key_when_a_losing_replan_races_a_winning_abort(conflict, monkeypatch):
    replan, abort = conflict.sign("replan"), conflict.sign("abort", reviewer="rex")
    real_crash_point = runtime.decisions.reviews.crash_point

    def abort_wins(name: str) -> None:
        real_crash_point(name)
        if name == CP_BEFORE_DECISION_COMMIT and not abort_wins.done:
            abort_wins.done = True
            # The replan's lease runs out (a stalled process); the abort takes the run and commits.
            Run.objects.filter(run_id=conflict.run_id).update(
                lease_expires_at=datetime.now(UTC) - timedelta(minutes=5))
            assert case_decide(decision=abort).applied

    abort_wins.done = False
    monkeypatch.setattr(runtime.decisions.reviews, "crash_point", abort_wins)
    with pytest.raises((LeaseLostError, StaleGenerationError)):
        case_decide(decision=replan)
    state = checkpoint_verify(run_id=conflict.run_id).state
    assert state.phase.value == "failed" and state.review_cases[0].status.value == "aborted"
    assert not state_ledger(state).key_quarantined(conflict.key)
    assert not IdempotencyRecord.objects.filter(idempotency_key=conflict.key, quarantined=True).exists()
