"""Story: a person denies a model's write with feedback; the model is told and the run goes on
(DESIGN.md section 6.14).

Against the fake model server, through the engine: the model proposes a deletion that needs an
approval; the operator denies it choosing "let the agent try something else"; the deletion never
runs, the model gets the reason as that tool call's result, proposes another write, finishes,
and the run completes verified. The denial is signed in the receipts ledger, traced, and the
run's evidence bundle verifies with it (and does not once it is altered).
"""

from __future__ import annotations

import json

import pytest

from runtime.bundles.export import bundle_export
from runtime.bundles.verification import bundle_verify
from runtime.core.ledger import state_ledger
from runtime.decisions.approvals import approvals_waiting
from runtime.decisions.denials import approval_deny
from runtime.engine import run_advance, run_start
from runtime.errors import ApprovalRefusedError
from runtime.evidence.attachments import attachment_get
from tests.engine.support import journal_effects, restore, run_target, trace_events, workspace_files
from tests.planners.chat_tools.support import write, write_chat_task

pytestmark = pytest.mark.django_db(transaction=True)

REASON = "keep hello.txt: other teams read it; write notes.md instead"
DELETE = {"tool": "delete_file", "arguments": {"path": "hello.txt"}}
STEPS = [[write("hello.txt", "hello\n")], [DELETE], [write("notes.md", "kept\n")], [{"finish": "done"}]]
FILES = {"hello.txt": "hello\n", "notes.md": "kept\n"}


def _waiting_run(tmp_path, server) -> str:
    spec = write_chat_task(tmp_path, base_url=server.base_url, files=FILES, approval_risks=("high",))
    run_id = run_start(spec_path=spec)
    report = run_advance(run_id=run_id)
    assert (report.phase, report.stop_reason) == ("awaiting_approval", "approval_required")
    return run_id


def test_the_model_is_told_the_reason_and_the_run_completes(tmp_path, fake_model, ratchet_keys):
    server = fake_model(STEPS)
    run_id = _waiting_run(tmp_path, server)
    [item] = approvals_waiting(run_ids=[run_id])
    outcome = approval_deny(run_id=run_id, approver="olivia", reason=REASON, mode="continue",
                            environment_fingerprint=item.environment_fingerprint, intent_digest=item.intent_digest)
    assert (outcome.outcome, outcome.phase) == ("denied_with_feedback", "running")

    report = run_advance(run_id=run_id)
    assert (report.phase, report.stop_reason) == ("completed", "verified")
    workspace = run_target(run_id)
    assert {path: text for path, (text, _) in workspace_files(workspace).items()} == FILES
    assert item.idempotency_key not in journal_effects(workspace), "the denied deletion never ran"
    assert server.requests_per_step() == {0: 1, 1: 1, 2: 1, 3: 1}

    state = restore(run_id).state
    sent = json.loads(attachment_get(digest=state.planner_state["transcript"]))
    results = [json.loads(m["content"]) for m in sent if m.get("role") == "tool"]
    assert [r["status"] for r in results] == ["executed", "denied", "executed"]
    assert results[1]["reason"] == REASON and results[1]["denied_by"] == "olivia"

    denial = state_ledger(state).denied(item.idempotency_key)
    assert (denial.mode.value, denial.reason, denial.intent_digest, denial.cursor) == (
        "continue", REASON, item.intent_digest, 1)
    [traced] = trace_events(run_id, "approval.denied_with_feedback")
    assert traced["denial"] == denial.model_dump(mode="json") and traced["mode"] == "continue"
    assert trace_events(run_id, "approval.denied") == []

    bundle = bundle_export(run_id=run_id, exported_by="auditor")
    assert bundle_verify(bundle) == []
    [entry] = [e for e in bundle["ledger"] if e["kind"] == "denied_write"]
    entry["body"] = entry["body"].replace("keep hello.txt", "delete hello.txt")
    findings = bundle_verify(bundle)
    assert any("ledger" in f for f in findings) and any("denial" in f for f in findings), findings


def test_a_stale_denial_is_refused_and_the_run_keeps_waiting(tmp_path, fake_model, ratchet_keys):
    server = fake_model(STEPS)
    run_id = _waiting_run(tmp_path, server)
    [item] = approvals_waiting(run_ids=[run_id])
    (run_target(run_id) / "other.txt").write_text("changed outside the run\n")
    with pytest.raises(ApprovalRefusedError, match="environment changed since you looked"):
        approval_deny(run_id=run_id, approver="olivia", reason=REASON, mode="continue",
                      environment_fingerprint=item.environment_fingerprint)
    assert restore(run_id).state.phase.value == "awaiting_approval"
    [refused] = trace_events(run_id, "approval.refused")
    assert refused["action"] == "deny" and refused["approver"] == "olivia"
    assert trace_events(run_id, "approval.denied_with_feedback") == []
