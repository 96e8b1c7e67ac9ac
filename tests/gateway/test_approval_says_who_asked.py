"""A write an agent asks for through the gateway waits on a card that names the agent, its token
and the call, and the risk rule that made it wait (DESIGN.md section 6.11)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from runtime.decisions.approvals import approvals_waiting
from runtime.gateway.calls import call_submit

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_waiting_write_names_the_agent_token_call_and_rule(gw) -> None:
    args = {"path": "config/limits.toml", "content": "max = 3\n"}
    assert call_submit(run_id=gw.run_id, call_id="risky-1", tool="write_file", arguments=args,
                       token=gw.token).status == "waiting_for_approval"

    [item] = approvals_waiting(run_ids=[gw.run_id])
    out = io.StringIO()
    call_command("approvals", "list", "--json", stdout=out)

    assert item.asked_by == {"via": "gateway", "agent": "story-agent", "token_id": gw.token_id, "call_id": "risky-1"}
    assert item.approval_rule["risk_rule"] == "external planner risk_paths['config/*.toml'] = high"
    assert item.approval_rule["approval_risks"] == ["high"] and item.approval_rule["policy_id"] == "gateway-policy"
    [listed] = json.loads(out.getvalue())
    assert listed["asked_by_text"] == f"story-agent (gateway token {gw.token_id}), call risky-1"
    assert "risk_paths['config/*.toml'] = high" in listed["approval_rule_text"]
    assert "+max = 3" in listed["dry_run_diff_text"]  # the diff itself, not its digest
