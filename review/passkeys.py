"""Reviewers' passkeys: registering one, and signing a decision with one (DESIGN.md section 6.9).

Registration is the WebAuthn create ceremony (``passkey_registration_begin`` ->
``navigator.credentials.create`` in ``static/review/passkeys.js`` -> ``passkey_register``): the
server keeps the credential id, the COSE public key and the sign count, never a private key.

Signing a decision is the get ceremony whose challenge is the decision's digest
(``runtime.core.passkey_evidence.decision_challenge``): ``passkey_decision_begin`` fixes every
field of the decision (the binding the page showed, the reviewer, the decision, a nonce, the
database-clock time and the reviewer root's key id) and answers the request options;
``passkey_decision_finish`` checks the assertion with the ``webauthn`` package (origin, relying
party id, challenge, user verification, a sign count that goes up), then signs the decision under
the reviewer root with the assertion and the registered public key inside it. Anyone can check
that evidence offline (``passkey_evidence.passkey_problem``); the server cannot make it, because
the authenticator's private key never leaves the reviewer's device.

What the view keeps between the two halves of a ceremony (the challenge, the fixed fields) lives
in the signed-in user's session, so a ceremony cannot be finished in another session.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import parse_authentication_credential_json
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from review.models import Passkey
from runtime.core.checkpoint import DecisionKind, PasskeyAssertion, SignedDecision
from runtime.core.evidence import decision_sign, new_nonce
from runtime.core.passkey_evidence import (
    b64url_decode,
    b64url_encode,
    decision_challenge,
    passkey_problem,
)
from runtime.core.signing import TrustRoot
from runtime.database.clock import db_now
from runtime.errors import PasskeyError
from runtime.keys import signer_for

RP_NAME = "Ratchet review"
TIMEOUT_MS = 120_000
"""How long (milliseconds) the browser waits for the reviewer's authenticator."""


def passkey_origin(*, request_origin: str) -> tuple[str, str]:
    """The WebAuthn ``(origin, rp_id)`` the dashboard expects.

    ``RATCHET_PASSKEY_ORIGIN`` if set, else the origin of ``RATCHET_DASHBOARD_URL``, else
    ``request_origin`` (``scheme://host[:port]`` as the browser reached this server); the relying
    party id is ``RATCHET_PASSKEY_RP_ID`` or that origin's host name (DESIGN.md section 6.9).
    """
    configured = settings.RATCHET_PASSKEY_ORIGIN or settings.RATCHET_DASHBOARD_URL
    if configured:
        parts = urlsplit(configured)
        origin = f"{parts.scheme}://{parts.netloc}"
    else:
        origin = request_origin
    return origin, settings.RATCHET_PASSKEY_RP_ID or (urlsplit(origin).hostname or "")


def passkey_list(*, reviewer: str) -> list[Passkey]:
    """``reviewer``'s registered passkeys, newest first."""
    return list(Passkey.objects.filter(reviewer=reviewer).order_by("-created_at"))


def passkey_registration_begin(*, reviewer: str, rp_id: str) -> tuple[str, dict[str, Any]]:
    """Creation options for a new passkey of ``reviewer``: ``(options JSON, state)``; the view
    keeps ``state`` in the session for :func:`passkey_register`. User verification is required;
    the reviewer's existing credentials are excluded (one passkey per authenticator)."""
    options = generate_registration_options(
        rp_id=rp_id, rp_name=RP_NAME, user_name=reviewer, user_display_name=reviewer,
        user_id=reviewer.encode(), timeout=TIMEOUT_MS,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED,
            user_verification=UserVerificationRequirement.REQUIRED),
        exclude_credentials=[PublicKeyCredentialDescriptor(id=bytes(p.credential_id))
                             for p in passkey_list(reviewer=reviewer)],
    )
    return options_to_json(options), {"challenge": b64url_encode(options.challenge)}


def passkey_register(*, reviewer: str, credential: str, state: dict[str, Any] | None, origin: str,
                     rp_id: str, name: str = "") -> Passkey:
    """Verify the authenticator's creation response and store the passkey for ``reviewer``.

    Args:
        credential: the JSON of ``PublicKeyCredential.toJSON()`` from the browser.
        state: what :func:`passkey_registration_begin` returned (None: no ceremony started).

    Raises:
        PasskeyError: no ceremony in this session, or the response does not verify (origin,
            relying party, challenge, user verification), or the credential is already registered.
    """
    if not state:
        raise PasskeyError("no passkey registration was started in this session", reviewer=reviewer)
    try:
        verified = verify_registration_response(
            credential=credential, expected_challenge=b64url_decode(state["challenge"]),
            expected_rp_id=rp_id, expected_origin=origin, require_user_verification=True)
    except (WebAuthnException, ValueError, KeyError) as exc:
        raise PasskeyError(f"the new passkey did not verify: {exc}", reviewer=reviewer) from None
    try:
        return Passkey.objects.create(reviewer=reviewer, credential_id=verified.credential_id,
                                      public_key=verified.credential_public_key,
                                      sign_count=verified.sign_count, name=name[:100])
    except IntegrityError:
        raise PasskeyError("this passkey is already registered", reviewer=reviewer) from None


def passkey_decision_begin(*, case_id: str, reviewer: str, decision: DecisionKind | str,
                           binding: dict[str, Any], rp_id: str) -> tuple[str, dict[str, Any]]:
    """Fix every field of ``reviewer``'s decision on ``case_id`` and answer the request options
    whose challenge is its digest: ``(options JSON, state)`` (DESIGN.md section 6.9).

    Args:
        binding: the bound fields the page showed (``DecisionForm.clean_binding``).

    Raises:
        PasskeyError: ``reviewer`` has no registered passkey.
        KeyringError: this process holds no private reviewer key.
        pydantic.ValidationError: a bound field is malformed.
    """
    passkeys = passkey_list(reviewer=reviewer)
    if not passkeys:
        raise PasskeyError("you have no registered passkey", reviewer=reviewer, case_id=case_id)
    keyring = signer_for(TrustRoot.REVIEWER)
    issued = db_now()
    # The expiry is fixed here, before the challenge: the authenticator signs it too (section 6.3).
    unsigned = SignedDecision.model_validate(
        {**binding, "reviewer": reviewer, "decision": DecisionKind(decision), "nonce": new_nonce(),
         "issued_at": issued, "expires_at": issued + timedelta(seconds=settings.RATCHET_DECISION_SECONDS),
         "key_id": keyring.current_key_id, "mac": "0" * 64}, strict=False)
    challenge = decision_challenge(unsigned)
    options = generate_authentication_options(
        rp_id=rp_id, challenge=challenge, timeout=TIMEOUT_MS,
        allow_credentials=[PublicKeyCredentialDescriptor(id=bytes(p.credential_id)) for p in passkeys],
        user_verification=UserVerificationRequirement.REQUIRED)
    fields = unsigned.model_dump(mode="json")
    del fields["mac"]
    return options_to_json(options), {"case_id": case_id, "fields": fields}


def passkey_decision_finish(*, reviewer: str, credential: str, state: dict[str, Any] | None,
                            origin: str, rp_id: str) -> SignedDecision:
    """Check ``reviewer``'s assertion over the fixed decision and sign it under the reviewer
    root with the assertion and the registered public key as its ``passkey`` evidence; the sign
    count is stored. The caller applies it with ``runtime.decisions.reviews.case_decide``.

    Raises:
        PasskeyError: no ceremony in this session, an unknown or someone else's credential, or
            an assertion that does not verify (origin, relying party, challenge, user
            verification, sign count).
    """
    case_id = (state or {}).get("case_id")
    if not state:
        raise PasskeyError("no passkey signature was started in this session", reviewer=reviewer)
    fields = dict(state["fields"])
    try:
        parsed = parse_authentication_credential_json(credential)
    except (WebAuthnException, ValueError) as exc:
        raise PasskeyError(f"the passkey answer is malformed: {exc}", reviewer=reviewer,
                           case_id=case_id) from None
    passkey = Passkey.objects.filter(reviewer=reviewer, credential_id=parsed.raw_id).first()
    if passkey is None:
        raise PasskeyError("that passkey is not registered to you", reviewer=reviewer, case_id=case_id)
    challenge = decision_challenge(fields)
    try:
        verified = verify_authentication_response(
            credential=parsed, expected_challenge=challenge, expected_rp_id=rp_id,
            expected_origin=origin, credential_public_key=bytes(passkey.public_key),
            credential_current_sign_count=passkey.sign_count, require_user_verification=True)
    except WebAuthnException as exc:
        raise PasskeyError(f"the passkey signature did not verify: {exc}", reviewer=reviewer,
                           case_id=case_id) from None
    Passkey.objects.filter(pk=passkey.pk).update(sign_count=verified.new_sign_count,
                                                 last_used_at=datetime.now(UTC))
    evidence = PasskeyAssertion(
        credential_id=b64url_encode(parsed.raw_id), public_key=b64url_encode(bytes(passkey.public_key)),
        authenticator_data=b64url_encode(parsed.response.authenticator_data),
        client_data_json=b64url_encode(parsed.response.client_data_json),
        signature=b64url_encode(parsed.response.signature), rp_id=rp_id, origin=origin)
    key_id = fields.pop("key_id")
    keyring = signer_for(TrustRoot.REVIEWER)
    if keyring.current_key_id != key_id:
        raise PasskeyError("the reviewer key rotated during signing; sign again", reviewer=reviewer,
                           case_id=case_id)
    signed = decision_sign(keyring=keyring, binding={**fields, "passkey": evidence.model_dump()})
    problem = passkey_problem(signed)
    if problem:
        raise PasskeyError(problem, reviewer=reviewer, case_id=case_id)
    return signed
