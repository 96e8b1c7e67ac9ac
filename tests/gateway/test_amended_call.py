"""A gateway call an approver amended: the waiting caller's answer carries the arguments that ran
(DESIGN.md sections 5.12 and 6.13)."""

from __future__ import annotations

import pytest

from runtime.decisions.amendments import approval_amend, proposed_arguments
from runtime.decisions.approvals import approvals_waiting
from runtime.gateway.approval_wait import approval_generation, approval_settled
from runtime.gateway.calls import call_submit

pytestmark = pytest.mark.django_db(transaction=True)

ARGS = {"path": "config/limits.toml", "content": "max = 9\n"}


def test_the_repeated_call_says_it_executed_with_the_amended_arguments(gw):
    waiting = call_submit(run_id=gw.run_id, call_id="risky", tool="write_file", arguments=ARGS, token=gw.token)
    assert waiting.status == "waiting_for_approval"
    generation = approval_generation(run_id=gw.run_id)
    [item] = approvals_waiting(run_ids=[gw.run_id])
    _, arguments = proposed_arguments(run_id=gw.run_id)

    approval_amend(run_id=gw.run_id, approver="olivia", arguments={**arguments, "content": "max = 3\n"},
                   proposed_intent_digest=item.intent_digest, environment_fingerprint=item.environment_fingerprint,
                   note="three is the limit")
    assert approval_settled(run_id=gw.run_id, generation=generation)  # a waiting caller wakes up
    done = call_submit(run_id=gw.run_id, call_id="risky", tool="write_file", arguments=ARGS, token=gw.token)

    assert done.status == "executed" and done.intent_digest != waiting.intent_digest
    assert (gw.workspace / "config/limits.toml").read_text() == "max = 3\n"
    amended = done.as_json()["amended"]
    assert amended["proposed_intent_digest"] == waiting.intent_digest
    assert amended["executed_intent_digest"] == done.intent_digest
    assert (amended["amended_by"], amended["note"]) == ("olivia", "three is the limit")
    assert amended["executed"]["target"] == amended["proposed"]["target"] == "config/limits.toml"
    again = call_submit(run_id=gw.run_id, call_id="risky", tool="write_file", arguments=ARGS, token=gw.token)
    assert again.repeated and again.amended == done.amended
    assert gw.effects() == {done.idempotency_key: 1}


def test_a_call_nobody_amended_carries_no_amendment(gw):
    call = call_submit(run_id=gw.run_id, call_id="note", tool="write_file",
                       arguments={"path": "notes/a.md", "content": "a\n"}, token=gw.token)
    assert call.status == "executed" and "amended" not in call.as_json()
