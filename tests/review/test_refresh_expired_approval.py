"""An operator refreshes an expired approval: fresh evidence bound to the current environment,
the old evidence sealed into the trace, and the write then runs exactly once (DESIGN.md
section 6.2: expiry is not corruption)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from runtime.engine import run_advance
from runtime.models import LedgerEntry
from tests.review.stories import events, expired_approval_run, hidden, messages, phase

pytestmark = pytest.mark.django_db(transaction=True)


def ledger_writes(run_id: str) -> list[dict]:
    """The bodies of the run's executed-write ledger entries, oldest first."""
    return [json.loads(body) for body in LedgerEntry.objects.filter(run_id=run_id, kind="executed_write")
            .order_by("seq").values_list("body", flat=True)]


@pytest.fixture
def expired(tmp_path, ratchet_keys, enqueued) -> str:  # type: ignore[no-untyped-def]
    return expired_approval_run(tmp_path)


def test_it_issues_fresh_evidence_and_seals_the_expired_one(client_for, expired, enqueued) -> None:
    client = client_for("operator")
    page = client.get(reverse("review:approvals")).content.decode()

    response = client.post(
        reverse("review:refresh", args=[expired]),
        {"environment_fingerprint": hidden(page, "environment_fingerprint")},
        follow=True,
    )

    assert response.redirect_chain == [(reverse("review:run", args=[expired]), 303)]
    assert "Approval refreshed by operator" in messages(response.content.decode())[0]
    [refreshed] = events(expired, "approval.refreshed")
    assert refreshed["approver"] == "operator"
    assert refreshed["sealed"]["approver"] == "earlier-operator", "the old evidence is sealed"
    assert refreshed["approval"]["approval_id"] != refreshed["sealed"]["approval_id"]
    assert enqueued == [expired, expired], "once by the earlier grant, once by the refresh"
    assert run_advance(run_id=expired).phase == "completed"
    # The receipt is in the run's ledger; the trace event names it by fingerprint.
    [write] = [
        e
        for e in ledger_writes(expired)
        if e["receipt"]["business_object"] == "limits.toml"
    ]
    assert write["receipt"]["approval_digest"], "the receipt binds the refreshed approval"
    assert write["receipt_fingerprint"] in {e["receipt_fingerprint"] for e in events(expired, "write.executed")}


def test_it_refuses_to_refresh_an_approval_that_was_never_given(
    client_for, tmp_path, ratchet_keys, enqueued
) -> None:
    from tests.review.stories import approval_run

    run_id = approval_run(tmp_path / "fresh")
    page = client_for("operator").get(reverse("review:approvals")).content.decode()
    response = client_for("operator").post(
        reverse("review:refresh", args=[run_id]),
        {"environment_fingerprint": hidden(page, "environment_fingerprint")},
        follow=True,
    )
    assert "there is no approval to refresh" in messages(response.content.decode())[0]
    assert phase(run_id) == "awaiting_approval"
