"""Story: a run driven by the chat-tools planner, through the engine (DESIGN.md section 6.7).

The model only proposes: the policy gate, approval rules and intent digests apply as to any other
planner, and the reply behind each committed intent is named in the committed planner state.
"""

from __future__ import annotations

import pytest

from runtime.engine import run_advance, run_start
from runtime.evidence.attachments import attachment_get
from runtime.evidence.trace import trace_verify
from tests.engine.support import journal_effects, restore, run_target, trace_events, trace_types, workspace_files
from tests.planners.chat_tools.support import FILES, HAPPY_STEPS, write, write_chat_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_writes_files_the_model_proposes(tmp_path, fake_model):
    server = fake_model(HAPPY_STEPS)
    run_id = run_start(spec_path=write_chat_task(tmp_path, base_url=server.base_url))
    report = run_advance(run_id=run_id)
    assert (report.phase, report.stop_reason) == ("completed", "verified")
    workspace = run_target(run_id)
    assert {path: text for path, (text, _) in workspace_files(workspace).items()} == FILES
    assert set(journal_effects(workspace).values()) == {1} and len(journal_effects(workspace)) == 2
    assert server.requests_per_step() == {0: 1, 1: 1, 2: 1}
    assert [e["tool"] for e in trace_events(run_id, "planner.model_replied")] == ["write_file", "write_file", "finish"]
    state = restore(run_id).state.planner_state
    assert state["cursor"] == 2 and attachment_get(digest=state["reply"])  # the last reply is kept
    assert trace_verify(run_id=run_id).ok  # the planner's own events are links of the hash chain


def test_it_stops_a_tool_the_policy_does_not_allow(tmp_path, fake_model):
    server = fake_model([[write("secrets/key.pem", "x")]])
    run_id = run_start(spec_path=write_chat_task(tmp_path, base_url=server.base_url, allowed_paths=("notes/**",)))
    report = run_advance(run_id=run_id)
    assert (report.phase, report.stop_reason) == ("failed", "policy_violation")
    assert workspace_files(run_target(run_id)) == {} and "intent.proposed" not in trace_types(run_id)


def test_it_waits_for_an_approval_of_a_deletion(tmp_path, fake_model):
    server = fake_model([[write("hello.txt", "hi")], [{"tool": "delete_file", "arguments": {"path": "hello.txt"}}]])
    run_id = run_start(spec_path=write_chat_task(tmp_path, base_url=server.base_url, approval_risks=("high",)))
    report = run_advance(run_id=run_id)
    assert (report.phase, report.stop_reason) == ("awaiting_approval", "approval_required")
    pending = restore(run_id).state.pending
    assert (pending.cursor, pending.action.kind, pending.action.risk.value) == (1, "delete_file", "high")
    assert server.requests_per_step() == {0: 1, 1: 1}


def test_it_freezes_on_a_model_reply_that_is_not_json(tmp_path, fake_model):
    server = fake_model([[{"raw_body": "not json"}]])
    run_id = run_start(spec_path=write_chat_task(tmp_path, base_url=server.base_url))
    report = run_advance(run_id=run_id)
    assert (report.phase, report.stop_reason) == ("needs_review", "planner_failed")
    assert [e["error"] for e in trace_events(run_id, "planner.model_error")] == ["MalformedModelReplyError"] * 2
    assert workspace_files(run_target(run_id)) == {} and server.requests_per_step() == {0: 2}


def test_it_stops_when_the_model_budget_is_used(tmp_path, fake_model):
    server = fake_model(HAPPY_STEPS)
    run_id = run_start(spec_path=write_chat_task(tmp_path, base_url=server.base_url, extra="max_model_calls = 1"))
    report = run_advance(run_id=run_id)
    assert (report.phase, report.stop_reason) == ("failed", "budget_exhausted")
    assert list(workspace_files(run_target(run_id))) == ["hello.txt"] and server.requests_per_step() == {0: 1}
