"""Story: a reviewer opens a case of every kind the runtime opens and reads both sides of what
conflicted -- the planned write beside the landed one (or the unapproved one), the cached receipt
beside the adapter's, the adapter's refusal or timeouts, the planner's or verifier's error, the
checkpointed environment beside the observed one, the signed checkpoint beside the ledger rows
found, the stored run beside a refused restore or a changed-code refusal -- never a placeholder
(DESIGN.md section 6.11)."""

from __future__ import annotations

import pytest

from runtime.decisions.case_sides import case_sides
from tests.browser.support import Story
from tests.cases.kinds import KINDS, NEEDS_EXAMPLE_AGENT, PLANNED, ROGUE
from tests.plugins.support import require_example_package

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(params=sorted(KINDS))
def opened(request, tmp_path, stack, users):  # type: ignore[no-untyped-def]
    """The case of one kind and its two sides, made before the browser starts (ORM use)."""
    if request.param in NEEDS_EXAMPLE_AGENT:
        require_example_package()
    case = KINDS[request.param](tmp_path)
    return request.param, case.case_id, case_sides(case=case)


def test_the_reviewer_sees_both_sides_of_the_case(browser, stack, opened) -> None:
    kind, case_id, sides = opened
    reviewer = Story(browser, stack.base_url, f"case-kind-{kind}")
    try:
        reviewer.sign_in("reviewer-ann")
        reviewer.open(f"/cases/{case_id}/", "case")
        section = reviewer.page.locator(f"section.case-sides[data-case-kind={kind}]")
        left = section.locator("figure[data-side=left]").inner_text()
        right = section.locator("figure[data-side=right]").inner_text()
        main = reviewer.page.inner_text("main")
    finally:
        reviewer.close()

    assert sides.left.title in left and sides.right.title in right
    for side, shown in ((sides.left, left), (sides.right, right)):
        for _label, value in side.facts:
            assert value in shown, (kind, value)
    assert "(none)" not in main and "(unknown)" not in main and "Planned parameters" not in main
    if kind == "receipt_conflict":
        assert PLANNED.strip() in left and ROGUE.strip() in right
        assert f"+  | {PLANNED.strip()}" in main and f"-  | {ROGUE.strip()}" in main  # the diff
    if kind == "planner_failed":
        assert "the model went away" in right
    if kind == "verifier_error":
        assert "VerifierCommandNotFoundError" in right and "answer.txt" in left
    if kind == "receipt_drift":
        assert "edited-in-the-database" in left and "edited-in-the-database" not in right
    if kind == "untrusted_receipt":
        assert PLANNED.strip() in left and PLANNED.strip() in right
    if kind == "outcome_unknown":
        assert "none for this key" in right and "timed out" in right
    if kind == "ledger_corrupt":
        assert "ledger entry 1 was altered" in right and "edited-in-the-database" in right
    if kind == "restore_refused":
        assert "BadSignatureError" in right and "run row phase" in left.lower()
    if kind == "code_changed":
        assert "CodeDigestMismatchError" in right and "run row phase" in left.lower()
