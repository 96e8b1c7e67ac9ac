"""A reviewer decides a case from its page: the password is re-entered, the decision is signed as
the signed-in user over the binding the page showed, and the runtime applies it -- or refuses it
and keeps the run frozen, which the page says plainly (DESIGN.md sections 6 and 7: a decision not
bound to the receipt fingerprint, both digests, environment version and nonce)."""

from __future__ import annotations

import hashlib

import pytest
from django.test import Client
from django.urls import reverse

from review.models import LoginThrottle, ThrottleKind
from runtime.engine import run_advance
from runtime.models import ReviewCase, Run
from tests.review.conftest import PASSWORD
from tests.review.stories import conflict_run, events, hidden, messages, phase

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def conflict(tmp_path, ratchet_keys, enqueued):  # type: ignore[no-untyped-def]
    return conflict_run(tmp_path)


def _decide(client, case_id: str, decision: str, password: str = PASSWORD, binding=None):  # type: ignore[no-untyped-def]
    url = reverse("review:case", args=[case_id])
    token = binding if binding is not None else hidden(client.get(url).content.decode(), "binding")
    return client.post(
        reverse("review:decide", args=[case_id]),
        {"decision": decision, "password": password, "binding": token},
    )


def test_it_applies_a_replan_signed_by_the_signed_in_reviewer(
    client_for, conflict, enqueued
) -> None:
    client = client_for("reviewer")
    response = _decide(client, conflict.case_id, "replan")

    assert response.status_code == 303
    assert response["Location"] == reverse("review:case", args=[conflict.case_id])
    [replanned] = events(conflict.run_id, "review.replanned")
    assert replanned["reviewer"] == "reviewer"
    assert replanned["sealed"]["decision"]["reviewer"] == "reviewer"
    assert replanned["quarantined_key"] == conflict.key
    case = ReviewCase.objects.get(case_id=conflict.case_id)
    assert (case.status, case.decided_by) == ("replanned", "reviewer")
    assert phase(conflict.run_id) == "running" and enqueued == [conflict.run_id]
    page = client.get(response["Location"]).content.decode()
    assert "Replan signed by reviewer and applied" in messages(page)[0]
    assert "Sign and apply" not in page, "a decided case offers no form"
    run_advance(run_id=conflict.run_id)
    keys = [e["idempotency_key"] for e in events(conflict.run_id, "intent.proposed")]
    assert keys[0] == conflict.key and conflict.key not in keys[1:], "a new key after replan"


def test_it_applies_an_abort_and_the_run_ends_failed(client_for, conflict) -> None:
    assert _decide(client_for("admin"), conflict.case_id, "abort").status_code == 303
    run = Run.objects.get(run_id=conflict.run_id)
    assert (run.phase, run.stop_reason) == ("failed", "aborted_by_reviewer")
    [aborted] = events(conflict.run_id, "review.aborted")
    assert aborted["reviewer"] == "admin"
    assert aborted["sealed"]["receipt"]["idempotency_key"] == conflict.key
    assert aborted["sealed"]["pending"]["idempotency_key"] == conflict.key


def test_it_signs_nothing_without_the_reviewers_password(client_for, conflict) -> None:
    response = _decide(client_for("reviewer"), conflict.case_id, "replan", password="wrong")
    assert response.status_code == 400
    assert "That is not your password. Nothing was signed." in response.content.decode()
    assert phase(conflict.run_id) == "needs_review"
    assert not events(conflict.run_id, "review.replanned")
    assert not events(conflict.run_id, "review.refused"), "nothing was even signed"
    counted = LoginThrottle.objects.get(key=hashlib.sha256(b"user:reviewer").hexdigest())
    assert counted.failures == 1, "counted like a failed sign-in"


def test_it_locks_the_password_prompt_like_the_sign_in(client_for, conflict, settings) -> None:
    settings.RATCHET_LOGIN_MAX_FAILURES = 2
    client = client_for("reviewer")
    assert _decide(client, conflict.case_id, "abort", password="wrong-1").status_code == 400
    assert _decide(client, conflict.case_id, "abort", password="wrong-2").status_code == 429
    locked = _decide(client, conflict.case_id, "abort")  # the right password, while locked
    assert locked.status_code == 429 and "Too many wrong passwords" in locked.content.decode()
    assert phase(conflict.run_id) == "needs_review"


def test_a_wrong_password_from_a_known_device_counts_on_that_devices_counter(conflict, personas) -> None:
    browser = Client()
    signed_in = browser.post(reverse("login"), {"username": "reviewer", "password": PASSWORD})
    assert signed_in.status_code == 302, "the browser signs in and becomes a known device"

    assert _decide(browser, conflict.case_id, "abort", password="wrong").status_code == 400

    [counted] = LoginThrottle.objects.all()
    assert (counted.kind, counted.failures) == (ThrottleKind.DEVICE, 1), (
        "the sign-in page's per-device counter, not the username's that a guesser can lock")
    assert phase(conflict.run_id) == "needs_review"


def test_it_shows_a_clear_refusal_when_the_environment_changed_after_the_page_was_read(
    client_for, conflict
) -> None:
    client = client_for("reviewer")
    token = hidden(
        client.get(reverse("review:case", args=[conflict.case_id])).content.decode(), "binding"
    )
    (conflict.workspace / "late-edit.txt").write_text("someone touched the workspace\n")

    response = _decide(client, conflict.case_id, "replan", binding=token)

    assert response.status_code == 303
    page = client.get(response["Location"]).content.decode()
    [shown] = messages(page)
    assert "Refused: the run stays frozen." in shown
    assert "environment changed after signing" in shown
    assert '<div class="alert error refusal" role="alert">' in page
    assert "Refused decisions" in page, "the refusal stays on the case page, from the trace"
    assert phase(conflict.run_id) == "needs_review"
    [refused] = events(conflict.run_id, "review.refused")
    assert refused["reviewer"] == "reviewer" and refused["case_id"] == conflict.case_id
    assert ReviewCase.objects.get(case_id=conflict.case_id).status == "open"


def test_it_rejects_a_binding_edited_in_the_page(client_for, conflict) -> None:
    client = client_for("reviewer")
    token = hidden(
        client.get(reverse("review:case", args=[conflict.case_id])).content.decode(), "binding"
    )
    response = _decide(client, conflict.case_id, "replan", binding=token[:-3] + "AAA")
    assert response.status_code == 400
    assert "was altered or belongs to another case" in response.content.decode()
    assert phase(conflict.run_id) == "needs_review" and not events(
        conflict.run_id, "review.refused"
    )


def test_it_refuses_a_second_decision_on_a_decided_case(client_for, conflict) -> None:
    client = client_for("reviewer")
    url = reverse("review:case", args=[conflict.case_id])
    token = hidden(client.get(url).content.decode(), "binding")
    assert _decide(client, conflict.case_id, "abort", binding=token).status_code == 303
    client.get(url)  # read the first outcome's message
    again = _decide(client, conflict.case_id, "replan", binding=token)
    assert again.status_code == 303
    assert "case is already aborted" in messages(client.get(url).content.decode())[0]
    assert phase(conflict.run_id) == "failed"
