"""An operator approves a waiting write from the queue: the approval is signed as the signed-in
user, bound to the fingerprint the page showed, and the run goes back to a worker
(DESIGN.md section 6.2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from runtime.decisions.approvals import approvals_waiting
from runtime.engine import run_advance
from tests.review.stories import approval_run, events, generation, hidden, messages, phase

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def waiting(tmp_path, ratchet_keys, enqueued) -> str:  # type: ignore[no-untyped-def]
    return approval_run(tmp_path)


def test_it_signs_the_approval_as_the_operator_and_hands_the_run_to_a_worker(
    client_for, waiting, enqueued
) -> None:
    client = client_for("operator")
    page = client.get(reverse("review:approvals")).content.decode()
    fingerprint = hidden(page, "environment_fingerprint")

    response = client.post(
        reverse("review:approve", args=[waiting]), {"environment_fingerprint": fingerprint}
    )

    assert response.status_code == 303
    assert response["Location"] == reverse("review:run", args=[waiting])
    [granted] = events(waiting, "approval.granted")
    assert granted["approver"] == "operator"
    assert granted["approval"]["approver"] == "operator"
    assert granted["approval"]["environment_fingerprint"] == fingerprint
    assert phase(waiting) == "pending"
    assert enqueued == [waiting]
    shown = messages(client.get(response["Location"]).content.decode())
    assert any("Approval granted by operator" in m for m in shown)
    assert run_advance(run_id=waiting).phase == "completed", "the approved write then runs"


def test_it_refuses_when_the_environment_changed_since_the_operator_looked(
    client_for, waiting, tmp_path: Path
) -> None:
    client = client_for("operator")
    fingerprint = hidden(
        client.get(reverse("review:approvals")).content.decode(), "environment_fingerprint"
    )
    (tmp_path / "ws" / "intruder.txt").write_text("changed behind the operator's back\n")
    before = generation(waiting)

    response = client.post(
        reverse("review:approve", args=[waiting]),
        {"environment_fingerprint": fingerprint},
        follow=True,
    )

    assert response.redirect_chain[-1] == (reverse("review:approvals") + f"?run={waiting}", 303)
    [shown] = messages(response.content.decode())
    assert "Could not approve" in shown and "environment changed since you looked" in shown
    assert phase(waiting) == "awaiting_approval" and generation(waiting) == before
    assert not events(waiting, "approval.granted")
    [refused] = events(waiting, "approval.refused")
    assert refused["approver"] == "operator" and refused["seen_fingerprint"] == fingerprint


def test_it_binds_the_approval_to_the_intent_digest_the_card_showed(client_for, waiting) -> None:
    client = client_for("operator")
    page = client.get(reverse("review:approvals")).content.decode()
    approve = page[page.index(f'action="{reverse("review:approve", args=[waiting])}"'):]
    shown_digest = hidden(approve, "intent_digest")
    assert shown_digest.startswith("sha256:"), "the approve form carries the digest it shows"
    fields = {"environment_fingerprint": hidden(approve, "environment_fingerprint")}

    other = client.post(reverse("review:approve", args=[waiting]),
                        {**fields, "intent_digest": "sha256:" + "0" * 64}, follow=True)

    [shown] = messages(other.content.decode())
    assert "Could not approve" in shown and "intent digest differs" in shown
    assert phase(waiting) == "awaiting_approval" and not events(waiting, "approval.granted")
    assert client.post(reverse("review:approve", args=[waiting]),
                       {**fields, "intent_digest": shown_digest}).status_code == 303
    [granted] = events(waiting, "approval.granted")
    assert granted["approval"]["intent_digest"] == shown_digest


def test_it_refuses_a_malformed_fingerprint_without_calling_the_runtime(
    client_for, waiting
) -> None:
    response = client_for("operator").post(
        reverse("review:approve", args=[waiting]),
        {"environment_fingerprint": "sha256:nope"},
        follow=True,
    )
    assert "environment fingerprint is malformed" in messages(response.content.decode())[0]
    assert phase(waiting) == "awaiting_approval"
    assert not events(waiting, "approval.refused") and not events(waiting, "approval.granted")


def test_it_says_the_run_is_not_waiting_when_it_was_approved_already(client_for, waiting) -> None:
    [item] = approvals_waiting(run_ids=[waiting])
    client = client_for("admin")
    data = {"environment_fingerprint": item.environment_fingerprint}
    assert client.post(reverse("review:approve", args=[waiting]), data).status_code == 303
    again = client.post(reverse("review:approve", args=[waiting]), data, follow=True)
    assert "run is not waiting for an approval" in messages(again.content.decode())[-1]
    assert len(events(waiting, "approval.granted")) == 1


def test_it_answers_404_for_an_unknown_run(client_for, db) -> None:
    response = client_for("operator").post(
        reverse("review:approve", args=["no-such-run"]),
        {"environment_fingerprint": "sha256:" + "0" * 64},
    )
    assert response.status_code == 404
