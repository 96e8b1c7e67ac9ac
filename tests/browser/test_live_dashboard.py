"""Stories of a dashboard that stays true: a reviewer decides from the content diff, a run page turns ``completed``
in every region without a reload, a new waiting approval appears in the queue and its badge, an
approval given with the keyboard only, and the case page at 390 px (DESIGN.md sections 6.6, 6.8).
"""

from __future__ import annotations

import pytest

from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.engine import run_advance, run_start
from runtime.models import ReviewCase, Run
from tests.browser.support import Story, linear_history, receipt_conflict_run, replay_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LIVE = 20_000
"""Milliseconds a story waits for the page to change on its own (polls every 2 s)."""


def _waiting_run(tmp_path, name: str) -> str:  # type: ignore[no-untyped-def]
    source = tmp_path / f"{name}-source"
    revs = linear_history(source, commits=3)
    run_id = run_start(spec_path=replay_task(tmp_path / name, source, revs, base=1, tip=0,
                                             approval_risks=("low",)))
    assert run_advance(run_id=run_id, wait_seconds=15).phase == "awaiting_approval"
    return run_id


def test_a_reviewer_decides_from_the_content_diff_and_the_page_fits_a_phone(
    browser, stack, users, tmp_path
) -> None:
    source = tmp_path / "source"
    revs = linear_history(source, commits=3)
    run_id, _ = receipt_conflict_run(tmp_path / "conflict", source, revs)
    case = ReviewCase.objects.get(run_id=run_id, status="open")
    story = Story(browser, stack.base_url, "decide-from-content-diff")
    try:
        story.sign_in("reviewer-ann")
        story.open(f"/cases/{case.case_id}/", "case-evidence")
        evidence = story.page.inner_text("section.evidence")
        assert "What the run would do, and what already landed" in evidence
        assert "Commit message" in evidence and "Files: planned commit against landed commit" in evidence
        assert story.page.locator("section.evidence pre.diff").count() >= 1
        assert story.page.locator("#nav-cases-count").inner_text().startswith("1")

        story.page.set_viewport_size({"width": 390, "height": 844})
        story.shot("case-at-390px")
        overflow = story.page.evaluate("document.documentElement.scrollWidth")
        assert overflow <= 390, f"the page scrolls sideways at 390 px ({overflow} px wide)"
        story.page.set_viewport_size({"width": 1280, "height": 900})

        story.page.check("input[name=decision][value=abort]")
        story.page.fill("#decision-password", "a long browser-test password")
        story.page.click("form.decision-form button[type=submit]")
        story.page.wait_for_load_state()
        story.shot("after-abort")
        assert story.dialogs and "Abort run" in story.dialogs[0], "abort asks for confirmation"
    finally:
        story.close()
    assert ReviewCase.objects.get(case_id=case.case_id).status == "aborted"


def test_a_run_page_turns_completed_in_every_region_without_a_reload(
    browser, stack, users, tmp_path
) -> None:
    run_id = _waiting_run(tmp_path, "live")
    story = Story(browser, stack.base_url, "run-turns-completed")
    try:
        story.sign_in("operator-ann")
        story.open(f"/runs/{run_id}/", "run-waiting")
        assert "awaiting approval" in story.page.inner_text("#run-status")
        assert "No pending action" not in story.page.inner_text("#committed")
        story.page.evaluate("window.__same_document = true")  # gone if the page reloads

        [waiting] = approvals_waiting(run_ids=[run_id])
        approval_grant(run_id=run_id, approver="operator-ann",
                       environment_fingerprint=waiting.environment_fingerprint)
        story.page.locator("#run-status .badge.phase-completed").wait_for(timeout=LIVE * 3)
        story.page.locator("#committed", has_text="No pending action").wait_for(timeout=LIVE)
        story.shot("run-completed-live")
        assert story.page.evaluate("window.__same_document === true"), "no reload happened"
        assert "write.executed" in story.page.inner_text("#timeline")
        assert "checkpoint.committed" in story.page.inner_text("#timeline")
        assert "Finished: not refreshing" in story.page.inner_text("#run-status")
        assert "Run updated: completed" in story.page.inner_text("#live-announcer")
    finally:
        story.close()
    assert Run.objects.get(run_id=run_id).phase == "completed"


def test_a_new_waiting_approval_appears_and_is_approved_with_the_keyboard(
    browser, stack, users, tmp_path
) -> None:
    story = Story(browser, stack.base_url, "new-approval-keyboard")
    try:
        story.sign_in("operator-ann")
        story.open("/approvals/", "queue-empty")
        before = story.page.locator("#nav-approvals-count").inner_text()
        story.page.evaluate("window.__same_document = true")

        run_id = _waiting_run(tmp_path, "arrives")
        card = story.page.locator(f"#approval-{run_id}")
        card.wait_for(timeout=LIVE)
        story.page.locator("#nav-approvals-count", has_text=str(int(before[0]) + 1)).wait_for(
            timeout=LIVE)
        assert story.page.evaluate("window.__same_document === true"), "no reload happened"
        story.shot("queue-new-approval")

        approve = card.get_by_role("button", name="Approve")
        for _ in range(200):
            story.page.keyboard.press("Tab")
            if approve.evaluate("button => button === document.activeElement"):
                break
        else:
            raise AssertionError("the Approve button cannot be reached with Tab")
        story.shot("approve-focused")
        story.page.keyboard.press("Enter")
        story.page.wait_for_url(f"{stack.base_url}/runs/{run_id}/")
        story.shot("after-keyboard-approval")
        assert any("Approval granted by operator-ann" in m for m in story.messages())
    finally:
        story.close()
