"""Story: a reviewer registers a passkey (a virtual authenticator in Chromium, through the Chrome
DevTools Protocol), signs abort on a receipt conflict with it, the run ends failed, and the
run's evidence bundle verifies offline with public keys only -- while a tampered assertion fails
(the authenticator, not the server, vouches for the decision; DESIGN.md section 6.9).

WebAuthn refuses an IP address as relying party id, so the story reaches the stack's server as
``localhost`` (the same loopback server).
"""

from __future__ import annotations

import copy

import pytest

from review.models import Passkey
from runtime.bundles.export import bundle_export
from runtime.bundles.verification import bundle_verify
from runtime.core.passkey_evidence import b64url_decode, b64url_encode
from runtime.models import ReviewCase, Run
from tests.browser.support import Story, linear_history, receipt_conflict_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def conflict(tmp_path, stack, users) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    source = tmp_path / "source"
    return receipt_conflict_run(tmp_path / "conflict", source, linear_history(source, commits=4))


def _virtual_authenticator(story: Story) -> str:
    cdp = story.context.new_cdp_session(story.page)
    cdp.send("WebAuthn.enable")
    made = cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
        "protocol": "ctap2", "transport": "internal", "hasResidentKey": True,
        "hasUserVerification": True, "isUserVerified": True, "automaticPresenceSimulation": True,
    }})
    return str(made["authenticatorId"])


def _tamper_passkey_signature(bundle: dict) -> dict:
    """The bundle with one byte of the stored assertion's signature flipped, in the committed
    checkpoint's envelope text."""
    forged = copy.deepcopy(bundle)
    case = forged["review_cases"][0]
    original = case["decision"]["passkey"]["signature"]
    raw = bytearray(b64url_decode(original))
    raw[len(raw) // 2] ^= 0x01
    for entry in forged["checkpoints"]:
        if isinstance(entry.get("envelope"), str) and original in entry["envelope"]:
            entry["envelope"] = entry["envelope"].replace(original, b64url_encode(bytes(raw)))
    return forged


def test_a_reviewer_signs_abort_with_a_passkey_and_the_bundle_verifies_offline(
    browser, stack, conflict
) -> None:
    run_id, _ = conflict
    case_id = ReviewCase.objects.get(run_id=run_id).case_id
    base_url = stack.base_url.replace("127.0.0.1", "localhost")
    reviewer = Story(browser, base_url, "reviewer-passkey")
    try:
        _virtual_authenticator(reviewer)
        reviewer.sign_in("reviewer-ann")
        reviewer.open("/passkeys/", "passkeys-none")
        reviewer.page.fill("input[name=name]", "virtual authenticator")
        reviewer.page.click("#passkey-register")
        reviewer.page.wait_for_selector("#passkey-list")
        reviewer.shot("passkey-registered")
        assert any("Passkey registered" in m for m in reviewer.messages())
        assert Passkey.objects.filter(reviewer="reviewer-ann").count() == 1

        reviewer.open(f"/cases/{case_id}/", "case")
        reviewer.page.check("input[name=decision][value=abort]")
        reviewer.page.click("#passkey-sign")
        reviewer.page.wait_for_selector(".messages .alert, #passkey-error:not([hidden])")
        reviewer.shot("case-signed")
        assert reviewer.page.locator("#passkey-error:not([hidden])").count() == 0, \
            reviewer.page.inner_text("#passkey-error")
        reviewer.shot("case-aborted")
        assert any("Abort signed by reviewer-ann with a passkey and applied" in m
                   for m in reviewer.messages()), reviewer.messages()
        assert reviewer.wait_for_phase(run_id, {"failed"}, timeout=10) == "failed"
    finally:
        reviewer.close()

    run = Run.objects.get(run_id=run_id)
    assert (run.phase, run.stop_reason) == ("failed", "aborted_by_reviewer")
    decision = ReviewCase.objects.get(case_id=case_id).decision
    assert decision["passkey"]["rp_id"] == "localhost"
    assert decision["passkey"]["origin"] == base_url

    bundle = bundle_export(run_id=run_id, exported_by="auditor")
    assert bundle_verify(bundle) == []  # public keys only: no checkpoint key given
    findings = bundle_verify(_tamper_passkey_signature(bundle))
    assert any("passkey signature does not verify" in f for f in findings), findings
