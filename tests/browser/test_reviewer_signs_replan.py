"""Story: a receipt conflict froze a run; a reviewer reads the case, re-enters the password and
signs replan in the browser; a real worker resumes the run with a new idempotency key
(DESIGN.md sections 5.1 and 6.3)."""

from __future__ import annotations

import pytest

from runtime.models import ReviewCase, Run, TraceEvent
from tests.browser.support import PASSWORD, Story, linear_history, receipt_conflict_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def conflict(tmp_path, stack, users) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    source = tmp_path / "source"
    return receipt_conflict_run(tmp_path / "conflict", source, linear_history(source, commits=4))


def test_a_reviewer_signs_replan_and_the_run_resumes_with_a_new_key(
    browser, stack, conflict
) -> None:
    run_id, old_key = conflict
    case_id = ReviewCase.objects.get(run_id=run_id).case_id
    story = Story(browser, stack.base_url, "reviewer-replan")
    try:
        story.sign_in("reviewer-ann")
        story.open("/cases/", "cases")
        story.page.click(f"a[href='/cases/{case_id}/']")
        story.page.wait_for_url(f"{stack.base_url}/cases/{case_id}/")
        story.shot("case")
        story.page.click("summary:has-text('Raw fields of the binding')")
        differing = story.page.locator("table.compare tr.differs th").all_inner_texts()
        assert any(text.startswith("Intent digest") for text in differing)
        assert story.page.locator("dl.binding").inner_text().count(old_key) == 1

        story.page.check("input[name=decision][value=replan]")
        story.page.fill("input[name=password]", PASSWORD)
        story.shot("signing")
        story.page.click("button:has-text('Sign and apply')")
        story.page.wait_for_url(f"{stack.base_url}/cases/{case_id}/")
        story.shot("case-decided")
        assert any("Replan signed by reviewer-ann and applied" in m for m in story.messages())

        phase = story.wait_for_phase(run_id, {"completed"})
        story.shot("run-resumed")
        assert phase == "completed"
        timeline = story.page.inner_text("#timeline")
        assert "review.replanned" in timeline and "write.executed" in timeline
    finally:
        story.close()

    replanned = TraceEvent.objects.get(run_id=run_id, event_type="review.replanned").payload
    assert replanned["reviewer"] == "reviewer-ann" and replanned["quarantined_key"] == old_key
    keys = list(
        TraceEvent.objects.filter(run_id=run_id, event_type="intent.proposed")
        .order_by("seq")
        .values_list("payload__idempotency_key", flat=True)
    )
    assert keys[0] == old_key
    assert len(keys) >= 2 and old_key not in keys[1:], "the run went on with new keys"
    run = Run.objects.get(run_id=run_id)
    assert (run.phase, run.stop_reason) == ("completed", "verified")
