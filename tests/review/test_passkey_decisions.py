"""A reviewer registers a passkey and signs a decision with it through the dashboard's endpoints
(a software authenticator stands in for the browser's); the password fallback can be turned off
(DESIGN.md section 6.9). The browser story is
``tests/browser/test_reviewer_signs_with_passkey.py``."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from review.models import Passkey
from runtime.core.checkpoint import SignedDecision
from runtime.core.evidence import decision_sign
from runtime.core.passkey_evidence import b64url_decode, decision_challenge
from runtime.core.signing import TrustRoot
from runtime.decisions.reviews import case_decide, decision_prepare
from runtime.keys import signer_for
from runtime.models import ReviewCase
from tests.core.test_passkey_evidence import SoftAuthenticator
from tests.review.conftest import PASSWORD
from tests.review.stories import conflict_run, events, hidden, messages, phase

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = "http://testserver"
RP_ID = "testserver"


@pytest.fixture
def conflict(tmp_path, ratchet_keys, enqueued):  # type: ignore[no-untyped-def]
    return conflict_run(tmp_path)


def _register(client, authenticator: SoftAuthenticator, *, origin: str = ORIGIN):  # type: ignore[no-untyped-def]
    options = client.post(reverse("review:passkey-options")).json()
    challenge = b64url_decode(options["challenge"])
    assert options["rp"]["id"] == RP_ID
    assert options["authenticatorSelection"]["userVerification"] == "required"
    return client.post(reverse("review:passkey-register"), json.dumps(
        {"credential": authenticator.registration_json(challenge, rp_id=RP_ID, origin=origin),
         "name": "soft key"}), content_type="application/json")


def _sign(client, case_id: str, decision: str, authenticator: SoftAuthenticator,  # type: ignore[no-untyped-def]
          *, challenge: bytes | None = None, count: int = 1):
    token = hidden(client.get(reverse("review:case", args=[case_id])).content.decode(), "binding")
    options = client.post(reverse("review:decide-passkey-options", args=[case_id]),
                          {"decision": decision, "binding": token})
    assert options.status_code == 200, options.content
    wanted = challenge if challenge is not None else b64url_decode(options.json()["challenge"])
    credential = authenticator.assertion_json(wanted, rp_id=RP_ID, origin=ORIGIN, count=count)
    return client.post(reverse("review:decide-passkey", args=[case_id]),
                       json.dumps({"credential": credential}), content_type="application/json")


def test_it_registers_a_passkey_and_signs_a_replan_with_it(client_for, conflict, enqueued) -> None:
    client = client_for("reviewer")
    authenticator = SoftAuthenticator()
    assert _register(client, authenticator).json() == {"redirect": reverse("review:passkeys")}
    [passkey] = Passkey.objects.filter(reviewer="reviewer")
    assert bytes(passkey.public_key) == authenticator.cose
    assert "Sign with passkey" in client.get(reverse("review:case", args=[conflict.case_id])).content.decode()

    response = _sign(client, conflict.case_id, "replan", authenticator)

    assert response.json() == {"redirect": reverse("review:case", args=[conflict.case_id])}
    page = client.get(reverse("review:case", args=[conflict.case_id])).content.decode()
    assert "Replan signed by reviewer with a passkey and applied" in messages(page)[0]
    assert phase(conflict.run_id) == "running" and enqueued == [conflict.run_id]
    decision = SignedDecision.model_validate(ReviewCase.objects.get(case_id=conflict.case_id).decision,
                                             strict=False)
    assert decision.passkey is not None and decision.passkey.public_key
    assert b64url_decode(decision.passkey.public_key) == authenticator.cose
    assert json.loads(b64url_decode(decision.passkey.client_data_json))["origin"] == ORIGIN
    assert Passkey.objects.get(pk=passkey.pk).sign_count == 1, "stored, checked next time"


def test_it_refuses_an_assertion_over_another_challenge(client_for, conflict) -> None:
    client = client_for("reviewer")
    authenticator = SoftAuthenticator()
    _register(client, authenticator)
    _sign(client, conflict.case_id, "abort", authenticator, challenge=b"\x00" * 32)
    page = client.get(reverse("review:case", args=[conflict.case_id])).content.decode()
    assert "Nothing was applied" in messages(page)[0]
    assert phase(conflict.run_id) == "needs_review"
    assert not events(conflict.run_id, "review.aborted")


def test_it_refuses_a_passkey_registered_on_another_origin(client_for, conflict) -> None:
    response = _register(client_for("reviewer"), SoftAuthenticator(), origin="https://evil.example")
    assert response.status_code == 400 and "did not verify" in response.json()["error"]
    assert not Passkey.objects.exists()


def test_it_refuses_a_sign_count_that_did_not_go_up(client_for, conflict) -> None:
    client = client_for("reviewer")
    authenticator = SoftAuthenticator()
    _register(client, authenticator)
    Passkey.objects.update(sign_count=5)
    _sign(client, conflict.case_id, "abort", authenticator, count=5)
    page = client.get(reverse("review:case", args=[conflict.case_id])).content.decode()
    assert "sign count" in messages(page)[0].lower()
    assert phase(conflict.run_id) == "needs_review"


def test_the_runtime_refuses_a_decision_whose_passkey_evidence_is_forged(conflict) -> None:
    """What the server alone can make: a reviewer-root signature over a decision whose assertion
    comes from a key it holds itself is still refused when that assertion does not verify."""
    binding = decision_prepare(case_id=conflict.case_id)
    keyring = signer_for(TrustRoot.REVIEWER)
    fields = {**binding, "reviewer": "reviewer", "decision": "abort", "nonce": "n" * 32,
              "issued_at": "2026-01-01T00:00:00Z"}
    unsigned = SignedDecision.model_validate({**fields, "key_id": keyring.current_key_id, "mac": "0" * 64},
                                             strict=False)
    evidence = SoftAuthenticator().assert_over(decision_challenge(unsigned))
    evidence["signature"] = SoftAuthenticator().assert_over(decision_challenge(unsigned))["signature"]
    forged = decision_sign(keyring=keyring, binding={**fields, "passkey": evidence})
    outcome = case_decide(decision=forged)
    assert not outcome.applied and outcome.reason.startswith("passkey evidence:")
    assert phase(conflict.run_id) == "needs_review"


def test_admins_can_turn_the_password_fallback_off(client_for, conflict, settings) -> None:
    settings.RATCHET_REVIEW_PASSWORD_FALLBACK = False
    client = client_for("reviewer")
    page = client.get(reverse("review:case", args=[conflict.case_id])).content.decode()
    assert 'name="password"' not in page
    token = hidden(page, "binding")
    response = client.post(reverse("review:decide", args=[conflict.case_id]),
                           {"decision": "abort", "password": PASSWORD, "binding": token})
    assert response.status_code == 303
    assert "Signing with a password is turned off" in messages(client.get(response["Location"]).content.decode())[0]
    assert phase(conflict.run_id) == "needs_review"
