"""An in-process run's waiting write names its planner and the rule that made it wait, on the
card and in ``approvals list --json`` (DESIGN.md section 6.11)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from runtime.decisions.approvals import approvals_waiting
from tests.review.stories import approval_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_in_process_write_names_the_planner_and_the_policy_rule(tmp_path: Path, ratchet_keys) -> None:
    run_id = approval_run(tmp_path)

    [item] = approvals_waiting(run_ids=[run_id])
    out = io.StringIO()
    call_command("approvals", "list", "--json", stdout=out)

    assert item.asked_by == {"via": "planner", "planner": "scripted"}
    assert item.approval_rule == {"risk": "high", "risk_rule": "risk high set by the scripted planner",
                                  "approval_risks": ["high"], "policy_id": "story-policy", "policy_version": "1"}
    [listed] = json.loads(out.getvalue())
    assert listed["run_id"] == run_id and listed["asked_by_text"] == "the scripted planner (in process)"
    assert listed["approval_rule_text"] == ("risk high set by the scripted planner; policy story-policy v1 needs an "
                                            "approval for risks: high")
    assert "+max_orders = 3" in listed["dry_run_diff_text"]
