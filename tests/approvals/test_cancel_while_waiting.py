"""An operator can cancel a run that waits for an approval: no worker is needed, no write happens."""

import pytest

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.decisions.cancellation import run_request_cancel

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_cancels_a_run_waiting_for_approval_without_a_side_effect(story):
    item = story.waiting()
    assert run_request_cancel(run_id=story.run_id, requested_by="olivia") == "cancelled"
    assert not (story.workspace / "limits.toml").exists()
    assert story.effects_for(item.idempotency_key) == 0
    state = checkpoint_verify(run_id=story.run_id).state
    assert state.stop_reason.value == "cancelled"
