"""Story: a reviewer signs abort on a receipt conflict; the run ends failed and the sealed evidence
(pending intent, conflicting receipt, signed decision) is on its trace page; the admin downloads
the signed evidence bundle and it verifies offline (DESIGN.md sections 4.8 and 6.3)."""

from __future__ import annotations

import json

import pytest

from runtime.bundles.verification import bundle_verify
from runtime.core.signing import TrustRoot
from runtime.keys import keyring_for
from runtime.models import ReviewCase, Run
from tests.browser.support import PASSWORD, Story, linear_history, receipt_conflict_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def conflict(tmp_path, stack, users) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    source = tmp_path / "source"
    return receipt_conflict_run(tmp_path / "conflict", source, linear_history(source, commits=4))


def test_a_reviewer_signs_abort_and_the_run_ends_failed_with_its_evidence(
    browser, stack, conflict, tmp_path
) -> None:
    run_id, old_key = conflict
    case_id = ReviewCase.objects.get(run_id=run_id).case_id
    reviewer = Story(browser, stack.base_url, "reviewer-abort")
    try:
        reviewer.sign_in("reviewer-ann")
        reviewer.open(f"/cases/{case_id}/", "case")
        reviewer.page.check("input[name=decision][value=abort]")
        reviewer.page.fill("input[name=password]", PASSWORD)
        reviewer.page.click("button:has-text('Sign and apply')")
        reviewer.page.wait_for_url(f"{stack.base_url}/cases/{case_id}/")
        reviewer.shot("case-aborted")
        assert reviewer.dialogs and "Abort run" in reviewer.dialogs[0], "abort asks first"
        assert any("Abort signed by reviewer-ann and applied" in m for m in reviewer.messages())
        assert "Sealed evidence" in reviewer.page.inner_text("main")

        assert reviewer.wait_for_phase(run_id, {"failed"}, timeout=10) == "failed"
        reviewer.page.locator("#timeline details").first.click()
        reviewer.shot("run-failed")
        assert "aborted_by_reviewer" in reviewer.page.inner_text("#run-status")
        aborted = reviewer.page.locator("#timeline li.event", has_text="review.aborted")
        assert aborted.count() == 1
    finally:
        reviewer.close()

    admin = Story(browser, stack.base_url, "reviewer-abort-admin")
    try:
        admin.sign_in("admin-ann")
        admin.open(f"/trace/?run={run_id}&event_type=review.aborted", "trace-evidence")
        row = admin.page.locator("#events tbody tr").first
        row.locator("details").click()
        admin.shot("trace-evidence-open")
        sealed = json.loads(row.locator("pre.json").inner_text())
        assert sealed["reviewer"] == "reviewer-ann"
        assert sealed["sealed"]["pending"]["idempotency_key"] == old_key
        assert sealed["sealed"]["receipt"]["idempotency_key"] == old_key
        assert sealed["sealed"]["decision"]["decision"] == "abort"
        assert sealed["sealed"]["decision"]["reviewer"] == "reviewer-ann"
        with admin.page.expect_download() as download:
            admin.page.click("text=Download the run's signed evidence bundle")
        saved = tmp_path / download.value.suggested_filename
        download.value.save_as(str(saved))
    finally:
        admin.close()

    assert saved.name == f"ratchet-bundle-{run_id}.json"
    bundle = json.loads(saved.read_text())

    assert bundle_verify(bundle, keyring_for(TrustRoot.CHECKPOINT)) == []
    assert [c["status"] for c in bundle["review_cases"]] == ["aborted"]
    run = Run.objects.get(run_id=run_id)
    assert (run.phase, run.stop_reason) == ("failed", "aborted_by_reviewer")
