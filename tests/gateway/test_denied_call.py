"""Story: a person denies an agent's waiting call with feedback; the gateway answers the call with
the reason and the agent's next call goes through (DESIGN.md section 6.14)."""

import pytest

from runtime.decisions.approvals import approvals_waiting
from runtime.decisions.denials import approval_deny
from runtime.errors import GatewayRunStoppedError
from runtime.gateway.calls import call_submit
from runtime.gateway.reads import call_get

pytestmark = pytest.mark.django_db(transaction=True)

RISKY = {"path": "config/limits.toml", "content": "max = 3\n"}
REASON = "limits are owned by finance; write a note asking them instead"


def test_the_waiting_call_is_answered_with_the_reason_and_the_run_goes_on(gw):
    waiting = call_submit(run_id=gw.run_id, call_id="risky", tool="write_file", arguments=RISKY, token=gw.token)
    assert waiting.status == "waiting_for_approval"
    [item] = approvals_waiting(run_ids=[gw.run_id])
    approval_deny(run_id=gw.run_id, approver="olivia", reason=REASON, mode="continue",
                  environment_fingerprint=item.environment_fingerprint, intent_digest=item.intent_digest)

    answer = call_submit(run_id=gw.run_id, call_id="risky", tool="write_file", arguments=RISKY, token=gw.token)
    assert (answer.status, answer.phase, answer.repeated) == ("denied", "running", True)
    assert answer.detail == f"denied by olivia: {REASON}"
    assert answer.denial["reason"] == REASON and answer.denial["intent_digest"] == item.intent_digest
    assert call_get(run_id=gw.run_id, call_id="risky", token=gw.token)["status"] == "denied"

    note = {"path": "notes/ask-finance.txt", "content": "please raise max to 3\n"}
    done = call_submit(run_id=gw.run_id, call_id="note", tool="write_file", arguments=note, token=gw.token)
    assert done.status == "executed"
    assert gw.effects() == {done.idempotency_key: 1}, "the denied write never ran"
    assert not (gw.workspace / "config/limits.toml").exists()


def test_a_stop_denial_still_ends_the_run(gw):
    call_submit(run_id=gw.run_id, call_id="risky", tool="write_file", arguments=RISKY, token=gw.token)
    approval_deny(run_id=gw.run_id, approver="olivia", reason=REASON)
    with pytest.raises(GatewayRunStoppedError) as stopped:
        call_submit(run_id=gw.run_id, call_id="risky", tool="write_file", arguments=RISKY, token=gw.token)
    assert stopped.value.context["stop_reason"] == "approval_denied"
