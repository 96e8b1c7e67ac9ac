"""Story: an approval expired before its write ran; an operator refreshes it in the browser and a
real worker then completes the run (DESIGN.md section 6.2: expiry is not corruption)."""

from __future__ import annotations

import time

import pytest

from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.engine import run_advance, run_start
from runtime.models import Run, TraceEvent
from tests.browser.support import Story, linear_history, replay_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def expired(tmp_path, stack, users) -> str:  # type: ignore[no-untyped-def]
    """A one-commit replay whose commit needs approval; approved briefly, then expired."""
    source = tmp_path / "source"
    revs = linear_history(source, commits=3)
    run_id = run_start(
        spec_path=replay_task(
            tmp_path / "approval", source, revs, base=1, tip=0, approval_risks=("low",)
        )
    )
    assert run_advance(run_id=run_id).phase == "awaiting_approval"
    [waiting] = approvals_waiting(run_ids=[run_id])
    approval_grant(
        run_id=run_id,
        approver="earlier-operator",
        environment_fingerprint=waiting.environment_fingerprint,
        ttl_seconds=0.3,
    )
    # The stack's sweeper picks up a pending run only after it sat idle for a second, so the
    # approval has expired before any worker can act: whoever drives the run next (this test or
    # the worker) freezes it as approval_expired. Wait for the lease if the worker has it.
    time.sleep(0.5)
    report = run_advance(run_id=run_id, wait_seconds=15)
    assert (report.phase, report.stop_reason) == ("awaiting_approval", "approval_expired")
    return run_id


def test_an_operator_refreshes_an_expired_approval_and_the_run_completes(
    browser, stack, expired
) -> None:
    story = Story(browser, stack.base_url, "refresh-expired-approval")
    try:
        story.sign_in("operator-ann")
        story.open("/approvals/", "approvals-queue")
        card = story.page.locator(f"#approval-{expired}")
        assert "approval expired" in card.inner_text()
        assert card.locator("pre.diff .diff-add").count() >= 1, "the dry-run diff is shown"
        assert card.get_by_role("button", name="Approve").count() == 0

        card.get_by_role("button", name="Refresh approval").click()
        story.page.wait_for_url(f"{stack.base_url}/runs/{expired}/")
        story.shot("run-after-refresh")
        assert any("Approval refreshed by operator-ann" in m for m in story.messages())

        assert story.wait_for_phase(expired, {"completed"}) == "completed"
        story.shot("run-completed")
        story.page.locator("#timeline").scroll_into_view_if_needed()
        assert "write.executed" in story.page.inner_text("#timeline")
    finally:
        story.close()

    run = Run.objects.get(run_id=expired)
    assert (run.phase, run.stop_reason) == ("completed", "verified")
    refreshed = TraceEvent.objects.get(run_id=expired, event_type="approval.refreshed").payload
    assert refreshed["approver"] == "operator-ann"
    assert refreshed["sealed"]["approver"] == "earlier-operator"
    executed = TraceEvent.objects.filter(run_id=expired, event_type="write.executed")
    assert executed.count() == 1, "the approved commit ran exactly once"
    assert all(shot.stat().st_size > 0 for shot in story.shots)
