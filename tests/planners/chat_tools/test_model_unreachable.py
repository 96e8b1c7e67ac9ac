"""Story: the model server is down; the run freezes, and what it says to do is what works.

A fresh user stopped the demo's fake model and resumed the running agent: the run froze
(``needs_review``) while its detail said "the run can be resumed", which a frozen run cannot
(resume leaves it frozen). The behaviour is kept -- the planner retries a bounded number of
times and then the engine fails closed -- and the words now agree with it: the detail names the
model's address, says the run is frozen for review with nothing executed, and that a reviewer's
replan asks the model again once it answers. The story then does exactly that (DESIGN.md
section 6.7).
"""

from __future__ import annotations

import pytest

from runtime.decisions.reviews import case_decide, decision_sign_for
from runtime.demo.fake_model import fake_model_start
from runtime.engine import run_advance, run_start
from runtime.models import ReviewCase
from tests.engine.support import restore, run_target, trace_events, workspace_files
from tests.planners.chat_tools.support import FILES, HAPPY_STEPS, write_chat_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_freezes_with_a_hint_that_matches_and_a_replan_asks_the_model_again(tmp_path, fake_model, ratchet_keys):
    stopped = fake_model(HAPPY_STEPS, own=True)
    base_url, port = stopped.base_url, stopped.port
    stopped.stop()
    run_id = run_start(spec_path=write_chat_task(tmp_path, base_url=base_url))

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("needs_review", "planner_failed")
    detail = restore(run_id).state.stop_detail
    assert "ModelUnavailableError" in detail and f"base_url={base_url}" in detail
    assert "the model is unreachable or failing at base_url: start it" in detail
    assert "the run is frozen for review and nothing was executed" in detail
    assert "a reviewer replans the case (the model is asked again)" in detail
    assert "can be resumed" not in detail and "and resume" not in detail
    assert [e["error"] for e in trace_events(run_id, "planner.model_error")] == ["ModelUnavailableError"] * 2
    assert run_advance(run_id=run_id).phase == "needs_review"  # a resume leaves it frozen, as the hint says

    server = fake_model_start(script={"steps": HAPPY_STEPS}, workdir=tmp_path / "model-again", port=port)
    try:
        case_id = ReviewCase.objects.get(run_id=run_id, status="open").case_id
        outcome = case_decide(decision=decision_sign_for(case_id=case_id, reviewer="rita", decision="replan"))
        assert outcome.applied, outcome
        report = run_advance(run_id=run_id)
    finally:
        server.stop()

    assert (report.phase, report.stop_reason) == ("completed", "verified")
    assert {path: text for path, (text, _) in workspace_files(run_target(run_id)).items()} == FILES
