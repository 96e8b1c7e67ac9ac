"""An operator denies a waiting write with a reason: it never runs and the run ends failed, with
the operator and the reason in the trace (DESIGN.md section 6.1)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from runtime.core.denial_evidence import DenyMode
from runtime.models import Run
from tests.review.stories import approval_run, events, messages, phase

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def waiting(tmp_path, ratchet_keys, enqueued) -> str:  # type: ignore[no-untyped-def]
    return approval_run(tmp_path)


def test_it_ends_the_run_failed_without_the_write(client_for, waiting, tmp_path) -> None:
    response = client_for("operator").post(
        reverse("review:deny", args=[waiting]),
        {"reason": "limits change needs a ticket"},
        follow=True,
    )
    assert "Denied: the write will not run" in messages(response.content.decode())[0]
    assert phase(waiting) == "failed"
    assert Run.objects.get(run_id=waiting).stop_reason == "approval_denied"
    [denied] = events(waiting, "approval.denied")
    assert denied["approver"] == "operator" and denied["reason"] == "limits change needs a ticket"
    assert not (tmp_path / "ws" / "limits.toml").exists()


def test_it_requires_a_reason(client_for, waiting) -> None:
    response = client_for("operator").post(
        reverse("review:deny", args=[waiting]), {"reason": "   "}, follow=True
    )
    assert "A denial needs a reason" in messages(response.content.decode())[0]
    assert phase(waiting) == "awaiting_approval"
    assert not events(waiting, "approval.denied")


def test_both_deny_forms_offer_the_deny_modes_and_ask_before_stopping_runs(client_for, waiting) -> None:
    page = client_for("operator").get(reverse("review:approvals")).content.decode()

    offered = re.findall(r'<input type="radio" name="mode" value="([a-z]+)"', page)
    assert offered == [m.value for m in DenyMode] * 2, "the single and the batch form, each mode once, in order"
    assert page.count(f'name="mode" value="{DenyMode.STOP.value}" checked') == 2
    single = re.search(r'<form [^>]*action="{}"[^>]*>'.format(re.escape(reverse("review:deny", args=[waiting]))), page)
    batch = re.search(r'<button type="submit" name="decision" value="deny"[^>]*>', page)
    for asker in (single.group(0), batch.group(0)):
        assert "data-confirm=" in asker and f'data-confirm-when="mode={DenyMode.STOP.value}"' in asker
