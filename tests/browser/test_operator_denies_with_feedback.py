"""Story: an operator denies a model's write in the browser, choosing "let the agent try something
else"; the real worker goes on, the model is told the reason, proposes another write and the run
completes (DESIGN.md section 6.14)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.demo.fake_model import fake_model_start
from runtime.engine import run_advance, run_start
from runtime.evidence.attachments import attachment_get
from runtime.models import Run, TraceEvent
from tests.browser.support import Story
from tests.planners.chat_tools.support import write, write_chat_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REASON = "keep hello.txt, other teams read it; write notes.md instead"
STEPS = [[write("hello.txt", "hello\n")], [{"tool": "delete_file", "arguments": {"path": "hello.txt"}}],
         [write("notes.md", "kept\n")], [{"finish": "done"}]]
FILES = {"hello.txt": "hello\n", "notes.md": "kept\n"}


@pytest.fixture
def model(tmp_path):  # type: ignore[no-untyped-def]
    """The fake model server in a child process of this test, stopped by its handle."""
    server = fake_model_start(script={"steps": STEPS}, workdir=tmp_path / "model")
    yield server
    server.stop()


@pytest.fixture
def waiting(tmp_path, stack, users, model) -> str:  # type: ignore[no-untyped-def]
    """A chat-tools run whose model proposed deleting hello.txt, a high-risk write waiting."""
    spec = write_chat_task(tmp_path / "chat", base_url=model.base_url, files=FILES, approval_risks=("high",))
    run_id = run_start(spec_path=spec)
    report = run_advance(run_id=run_id, wait_seconds=15)  # the stack's worker may get there first
    assert report.phase == "awaiting_approval", report
    return run_id


def test_a_denial_with_feedback_lets_the_chat_tools_run_try_something_else(browser, stack, waiting, model) -> None:
    story = Story(browser, stack.base_url, "deny-with-feedback")
    try:
        story.sign_in("operator-ann")
        story.open(f"/approvals/?run={waiting}", "approvals-queue")
        card = story.page.locator(f"#approval-{waiting}")
        assert "delete_file" in card.inner_text()
        card.get_by_label("Reason to deny").fill(REASON)
        card.get_by_label("let the agent try something else (it is told your reason)").check()
        story.shot("deny-with-feedback-filled")
        card.get_by_role("button", name="Deny").click()
        story.page.wait_for_url(f"{stack.base_url}/runs/{waiting}/")
        story.shot("run-after-denial")
        assert any("The agent is told your reason" in m for m in story.messages()), story.messages()
        assert story.dialogs == [], "denying with feedback does not end the run, so nothing asks to confirm"

        assert story.wait_for_phase(waiting, {"completed"}) == "completed"
        story.shot("run-completed")
        story.page.locator("#timeline").scroll_into_view_if_needed()
        assert "approval.denied_with_feedback" in story.page.inner_text("#timeline")
    finally:
        story.close()

    run = Run.objects.get(run_id=waiting)
    assert (run.phase, run.stop_reason) == ("completed", "verified")
    denied = TraceEvent.objects.get(run_id=waiting, event_type="approval.denied_with_feedback").payload
    assert (denied["approver"], denied["reason"], denied["denial"]["mode"]) == ("operator-ann", REASON, "continue")
    proposed = TraceEvent.objects.filter(run_id=waiting, event_type="intent.proposed").order_by("seq")
    assert [(p["action"]["kind"], p["action"]["target"]) for p in proposed.values_list("payload", flat=True)] == [
        ("write_file", "hello.txt"), ("delete_file", "hello.txt"), ("write_file", "notes.md")]
    assert TraceEvent.objects.filter(run_id=waiting, event_type="write.executed").count() == 2
    target = Path(run.spec["target"])
    assert {p: (target / p).read_text() for p in FILES} == FILES, "the denied deletion never ran"
    state = checkpoint_verify(run_id=waiting).state
    sent = json.loads(attachment_get(digest=state.planner_state["transcript"]))
    told = [json.loads(m["content"]) for m in sent if m.get("role") == "tool"][1]
    assert (told["status"], told["reason"], told["denied_by"]) == ("denied", REASON, "operator-ann")
    assert model.requests_per_step() == {0: 1, 1: 1, 2: 1, 3: 1}
