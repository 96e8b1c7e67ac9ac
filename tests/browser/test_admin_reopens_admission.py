"""Story: a duplicate submission closed admission for a task; an admin sees the banner with the
run whose write is still pending, opens the scope from it, re-opens admission with a signed
decision and then raises a threshold through the confirmation page (DESIGN.md section 8.3)."""

from __future__ import annotations

import pytest

from runtime.engine import run_advance, run_start
from runtime.evidence.trace import trace_append
from runtime.models import AdmissionDecision, AdmissionThresholdChange, Run
from runtime.rollout.admission import admission_decision_verify, admission_state
from tests.browser.support import Story, linear_history, replay_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def closed(tmp_path, stack, users) -> Run:  # type: ignore[no-untyped-def]
    """A run waiting for an approval before its commit (a pending side effect no worker moves),
    and a duplicate counted for its task, which closes admission."""
    source = tmp_path / "source"
    revs = linear_history(source, commits=3)
    run_id = run_start(spec_path=replay_task(tmp_path / "gated", source, revs, base=1, tip=0,
                                             approval_risks=("low",)))
    assert run_advance(run_id=run_id).phase == "awaiting_approval"
    trace_append(run_id=run_id, event_type="audit.effects", payload={"keys": 1, "duplicates": 1, "missing": []})
    run = Run.objects.get(run_id=run_id)
    assert not admission_state(tenant_id=run.tenant_id, task_id=run.task_id).open
    return run


def test_an_admin_checks_the_pending_run_and_reopens_admission(browser, stack, closed) -> None:
    story = Story(browser, stack.base_url, "admin-reopens-admission")
    scope = f"{closed.tenant_id}/{closed.task_id}"
    try:
        story.sign_in("admin-ann")
        banner = story.page.locator(".admission-banner")
        assert "New runs are refused" in banner.inner_text()
        assert banner.locator(f"a[href='/runs/{closed.run_id}/']").count() == 1, "the pending run is linked"

        banner.get_by_role("link", name="Review and re-open…").click()
        story.page.wait_for_url(f"{stack.base_url}/rollout/admission/{scope}/")
        story.shot("scope-closed")
        story.page.fill("textarea[name=reason] >> nth=0", "checked the waiting commit: not executed")
        story.page.check("input[name=checked]")
        story.page.get_by_role("button", name="Sign and re-open").click()
        story.page.wait_for_load_state()
        story.shot("reopened")
        assert any("Admission re-opened" in m for m in story.messages())
        assert story.page.locator(".admission-banner").count() == 0
        assert story.dialogs and "Re-open admission" in story.dialogs[0]

        story.page.select_option("select[name=name]", "max_duplicates")
        story.page.fill("input[name=value]", "2")
        story.page.fill("textarea[name=reason]", "two retried calls per hour are expected")
        story.page.get_by_role("button", name="Review the change…").click()
        story.page.wait_for_load_state()
        story.shot("confirm")
        assert "Confirm the threshold change" in story.page.inner_text("h1")
        story.page.get_by_role("button", name="Confirm and record").click()
        story.page.wait_for_url(f"{stack.base_url}/rollout/admission/{scope}/")
        story.shot("audited")
        assert "two retried calls per hour are expected" in story.page.inner_text("table.audit")
    finally:
        story.close()

    decision = AdmissionDecision.objects.get(tenant_id=closed.tenant_id, task_id=closed.task_id)
    admission_decision_verify(decision)
    assert decision.decided_by == "admin-ann"
    change = AdmissionThresholdChange.objects.get()
    assert (change.name, change.new_value, change.changed_by) == ("max_duplicates", 2.0, "admin-ann")
