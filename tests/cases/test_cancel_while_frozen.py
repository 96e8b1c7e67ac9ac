"""Cancelling a run frozen for review keeps the pending write, the receipt and the case."""

import pytest

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.decisions.cancellation import run_request_cancel

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_cancels_a_frozen_run_and_keeps_the_evidence(conflict):
    assert run_request_cancel(run_id=conflict.run_id, requested_by="olivia") == "cancelled"
    state = checkpoint_verify(run_id=conflict.run_id).state
    assert state.pending is not None and state.pending.idempotency_key == conflict.key
    assert state.review_cases[0].receipt is not None
    assert conflict.effects_for(conflict.key) == 1
