"""Story: an operator ticks five waiting approvals in the browser and approves them in one action
with a comment; one of them went stale after the page was shown (its environment changed), so it
is refused and named, the other four are approved and a real worker completes them (DESIGN.md
section 6.15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.engine import run_advance, run_start
from runtime.models import Run, TraceEvent
from tests.approvals.conftest import STEPS
from tests.browser.support import Story
from tests.factories import write_scripted_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

COMMENT = "fine for the Q3 limits review"


@pytest.fixture
def five(tmp_path, stack, users) -> list[tuple[str, Path]]:  # type: ignore[no-untyped-def]
    """Five scripted runs each waiting for the approval of a high-risk write: ``(run id, workspace)``."""
    runs = []
    for n in range(5):
        run_id = run_start(spec_path=write_scripted_task(tmp_path / f"r{n}", steps=STEPS, approval_risks=("high",)))
        assert run_advance(run_id=run_id, wait_seconds=15).phase == "awaiting_approval"
        runs.append((run_id, tmp_path / f"r{n}" / "ws"))
    return runs


def test_a_batch_of_five_with_one_stale_approves_four_and_reports_the_fifth(browser, stack, five) -> None:
    story = Story(browser, stack.base_url, "batch-of-five")
    stale_id, stale_ws = five[3]
    try:
        story.sign_in("operator-ann")
        story.open("/approvals/", "approvals-queue")
        for run_id, _ in five:
            story.page.locator(f"#approval-{run_id} input[data-batch-item]").check()
        story.page.get_by_label("Comment with the approvals (optional, signed)").fill(COMMENT)
        story.shot("five-selected")
        (stale_ws / "touched.txt").write_text("changed after the page was shown\n")  # one item goes stale
        story.page.get_by_role("button", name="Approve selected").click()
        story.page.wait_for_url(f"{stack.base_url}/approvals/")
        story.shot("batch-result")
        [message] = story.messages()
        assert message.startswith("4 of 5 decided."), message
        results = story.page.locator(".batch-results li")
        assert results.count() == 5
        refused = story.page.locator(f'.batch-results li[data-batch-run="{stale_id}"]')
        assert refused.get_attribute("data-batch-ok") == "no"
        assert "not decided: the environment changed since you looked" in refused.inner_text()
        for run_id, _ in five:
            if run_id != stale_id:
                assert "approved" in story.page.locator(f'.batch-results li[data-batch-run="{run_id}"]').inner_text()
        assert story.page.locator(f"#approval-{stale_id}").count() == 1, "the stale one still waits"

        for run_id, _ in five:
            if run_id != stale_id:
                assert story.wait_for_phase(run_id, {"completed"}) == "completed"
        story.shot("last-run-completed")
    finally:
        story.close()

    assert Run.objects.get(run_id=stale_id).phase == "awaiting_approval"
    assert TraceEvent.objects.filter(run_id=stale_id, event_type="approval.refused").count() == 1
    for run_id, _ in five:
        if run_id == stale_id:
            continue
        granted = TraceEvent.objects.get(run_id=run_id, event_type="approval.granted").payload
        assert (granted["approver"], granted["comment"], granted["approval"]["comment"]) == (
            "operator-ann", COMMENT, COMMENT)
        assert checkpoint_verify(run_id=run_id).state.phase.value == "completed"
        assert TraceEvent.objects.filter(run_id=run_id, event_type="write.executed").count() == 2
