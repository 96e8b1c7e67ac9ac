"""Story: an approver amends a chat-tools write; the model reads in the tool result that the
executed arguments differ from those it proposed (DESIGN.md section 6.13)."""

from __future__ import annotations

import json

import pytest

from runtime.decisions.amendments import approval_amend, proposed_arguments
from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.engine import run_advance, run_start
from runtime.evidence.attachments import attachment_get
from tests.engine.support import journal_effects, restore, run_target, workspace_files
from tests.planners.chat_tools.support import HAPPY_STEPS, write_chat_task

pytestmark = pytest.mark.django_db(transaction=True)

AMENDED = "hello from the approver\n"


def _tool_results(run_id: str) -> list[dict]:
    messages = json.loads(attachment_get(digest=restore(run_id).state.planner_state["transcript"]))
    return [json.loads(m["content"]) for m in messages if m.get("role") == "tool"]


def test_the_model_is_told_its_write_ran_amended(tmp_path, fake_model, ratchet_keys):
    server = fake_model(HAPPY_STEPS)
    spec = write_chat_task(tmp_path, base_url=server.base_url, approval_risks=("high",),
                           files={"hello.txt": AMENDED, "notes/todo.md": "- ship\n"},
                           extra='risks = { write_file = "high", delete_file = "high" }')
    run_id = run_start(spec_path=spec)
    assert run_advance(run_id=run_id).phase == "awaiting_approval"
    [item] = approvals_waiting(run_ids=[run_id])
    _, arguments = proposed_arguments(run_id=run_id)
    assert arguments == {"path": "hello.txt", "content": "hello\n", "executable": False}

    approval_amend(run_id=run_id, approver="olivia", arguments={**arguments, "content": AMENDED},
                   proposed_intent_digest=item.intent_digest, environment_fingerprint=item.environment_fingerprint,
                   note="say who wrote it")
    assert run_advance(run_id=run_id).phase == "awaiting_approval"  # the model's second write waits
    [told] = _tool_results(run_id)
    assert told["status"] == "executed"
    assert told["amended"]["executed_arguments"] == {"path": "hello.txt", "content": AMENDED, "executable": False}
    assert (told["amended"]["by"], told["amended"]["reason"]) == ("olivia", "say who wrote it")

    [second] = approvals_waiting(run_ids=[run_id])
    approval_grant(run_id=run_id, approver="olivia", environment_fingerprint=second.environment_fingerprint)
    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("completed", "verified")
    assert workspace_files(run_target(run_id))["hello.txt"][0] == AMENDED
    assert set(journal_effects(run_target(run_id)).values()) == {1}
    first, after_second = _tool_results(run_id)
    assert "amended" in first and "amended" not in after_second  # only the amended write is reported so
    assert server.requests_per_step() == {0: 1, 1: 1, 2: 1}
