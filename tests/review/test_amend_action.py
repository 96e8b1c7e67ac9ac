"""An operator amends a waiting write on the Amend page: preview the amended diff, confirm, and the
run executes the amended action (DESIGN.md section 6.13)."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.urls import reverse

import runtime.decisions.amendments as amendments
from runtime.engine import run_advance
from tests.review.stories import approval_run, events, hidden, messages, phase

pytestmark = pytest.mark.django_db(transaction=True)

AMENDED = "max_orders = 2\nmax_refunds = 1\n"


@pytest.fixture
def waiting(tmp_path, ratchet_keys, enqueued) -> str:  # type: ignore[no-untyped-def]
    return approval_run(tmp_path)


def _arguments(page: str) -> dict:
    found = re.search(r'<textarea name="arguments"[^>]*>(.*?)</textarea>', page, re.S)
    assert found, "no arguments field on the page"
    return json.loads(html.unescape(found.group(1)))


def test_it_previews_then_amends_and_the_run_writes_the_amended_content(client_for, waiting, tmp_path) -> None:
    client = client_for("operator")
    queue = client.get(reverse("review:approvals")).content.decode()
    assert reverse("review:approval-amend", args=[waiting]) in queue  # the card links to the page
    page = client.get(reverse("review:approval-amend", args=[waiting])).content.decode()
    arguments = _arguments(page)
    assert arguments["content"] == "max_orders = 3\nmax_refunds = 1\n"
    intent = hidden(page, "proposed_intent_digest")

    preview = client.post(reverse("review:amend", args=[waiting]), {
        "arguments": json.dumps({**arguments, "content": AMENDED}), "proposed_intent_digest": intent,
        "note": "finance caps it at 2", "step": "preview"}).content.decode()
    assert "+max_orders = 2" in html.unescape(preview) and 'id="amend-confirm"' in preview
    assert phase(waiting) == "awaiting_approval"  # a preview changes nothing

    response = client.post(reverse("review:amend", args=[waiting]), {
        "arguments": json.dumps(_arguments(preview)), "proposed_intent_digest": intent,
        "environment_fingerprint": hidden(preview, "environment_fingerprint"), "note": "finance caps it at 2",
        "step": "confirm"}, follow=True)

    assert "Amended and approved by operator" in messages(response.content.decode())[0]
    [amended] = events(waiting, "intent.amended")
    assert amended["approver"] == "operator" and amended["note"] == "finance caps it at 2"
    assert run_advance(run_id=waiting, worker="story-worker").phase == "completed"
    assert (tmp_path / "ws" / "limits.toml").read_text() == AMENDED


def test_it_refuses_an_amendment_outside_the_policy_and_says_why(client_for, waiting) -> None:
    client = client_for("operator")
    page = client.get(reverse("review:approval-amend", args=[waiting])).content.decode()
    response = client.post(reverse("review:amend", args=[waiting]), {
        "arguments": json.dumps({**_arguments(page), "path": "../outside.toml"}),
        "proposed_intent_digest": hidden(page, "proposed_intent_digest"), "step": "preview"}, follow=True)
    [message] = messages(response.content.decode())
    assert "Could not amend run" in message and "not a valid write_file" in html.unescape(message)
    assert phase(waiting) == "awaiting_approval" and not events(waiting, "intent.amended")


def test_a_reviewer_may_not_amend(client_for, waiting) -> None:
    assert client_for("reviewer").get(reverse("review:approval-amend", args=[waiting])).status_code == 403


def test_the_amend_page_restores_and_previews_the_waiting_write_once(client_for, waiting, monkeypatch) -> None:
    restored: list[str] = []
    verify = amendments.checkpoint_verify
    monkeypatch.setattr(amendments, "checkpoint_verify",
                        lambda **kwargs: restored.append(kwargs["run_id"]) or verify(**kwargs))

    page = client_for("operator").get(reverse("review:approval-amend", args=[waiting])).content.decode()

    assert _arguments(page)["content"] == "max_orders = 3\nmax_refunds = 1\n"
    assert hidden(page, "proposed_intent_digest").startswith("sha256:")
    assert restored == [waiting], "one restore of the committed checkpoint per page, not one per read"
