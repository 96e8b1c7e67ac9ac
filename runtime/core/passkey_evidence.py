"""Offline checks of a reviewer's passkey (WebAuthn) assertion over a decision (DESIGN.md section 6.9).

A decision signed with a passkey carries a :class:`~runtime.core.checkpoint.PasskeyAssertion`:
the authenticator data, client data JSON and signature the reviewer's authenticator returned,
and the COSE public key the reviewer registered. The assertion's challenge is
:func:`decision_challenge` -- the SHA-256 of the canonical JSON of every decision field except
``mac`` and ``passkey`` (the same bytes the reviewer-root signature covers, minus the passkey) --
so the authenticator approved exactly this decision. Checking needs no server and no secret:
only the bytes in the decision (``passkey_problem``). The server holds no authenticator private
key, so it cannot make an assertion that verifies under a registered key.

Framework-free: imports nothing from Django; the WebAuthn parsing and signature helpers are
the maintained ``webauthn`` package's, the cryptography is ``cryptography``'s.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from cryptography.exceptions import InvalidSignature

from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import PasskeyAssertion, RunState, SignedDecision

ASSERTION_TYPE = "webauthn.get"
"""``clientDataJSON.type`` of an assertion (a registration says ``webauthn.create``)."""


def b64url_decode(text: str) -> bytes:
    """Unpadded base64url text -> bytes.

    Raises:
        ValueError: not base64url.
    """
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url_encode(raw: bytes) -> str:
    """Bytes -> unpadded base64url text (the WebAuthn JSON encoding)."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decision_challenge(fields: SignedDecision | dict[str, Any]) -> bytes:
    """The 32-byte WebAuthn challenge for a decision: SHA-256 of the canonical JSON (RFC 8785)
    of every field except ``mac`` and ``passkey`` (DESIGN.md section 6.9).

    Args:
        fields: the decision, or its JSON-mode fields (``SignedDecision.model_dump(mode="json")``
            before it is signed: ``key_id`` included, ``mac`` and ``passkey`` ignored).
    """
    data = fields.model_dump(mode="json") if isinstance(fields, SignedDecision) else fields
    body = {k: v for k, v in data.items() if k not in ("mac", "passkey")}
    return hashlib.sha256(canonical_json(body)).digest()


def assertion_problem(evidence: PasskeyAssertion, *, challenge: bytes) -> str | None:
    """Why ``evidence`` is not a user-verified assertion over ``challenge`` by the key it holds,
    or None when it is.

    Checks: client data type ``webauthn.get``, its challenge equals ``challenge``, its origin is
    the recorded one; the authenticator data's RP id hash is SHA-256 of the recorded ``rp_id``,
    user present and user verified are set; the signature over ``authenticatorData ||
    SHA-256(clientDataJSON)`` verifies under the COSE key (ES256, EdDSA, RS256... as the key says).
    """
    # Imported here, not at the top: importing ``webauthn`` loads its ASN.1 attestation formats
    # (~0.3 s), and every worker, resume and gateway process imports this module at start-up
    # while only a passkey-signed decision needs the package.
    from webauthn.helpers import (
        decode_credential_public_key,
        decoded_public_key_to_cryptography,
        parse_authenticator_data,
        parse_client_data_json,
    )
    from webauthn.helpers.exceptions import WebAuthnException
    from webauthn.helpers.verify_signature import verify_signature

    try:
        auth_data = b64url_decode(evidence.authenticator_data)
        client_json = b64url_decode(evidence.client_data_json)
        signature = b64url_decode(evidence.signature)
        client = parse_client_data_json(client_json)
        parsed = parse_authenticator_data(auth_data)
    except (ValueError, WebAuthnException) as exc:
        return f"passkey assertion does not parse: {exc}"
    if client.type != ASSERTION_TYPE:
        return f"passkey assertion has client data type {client.type!r}, not {ASSERTION_TYPE!r}"
    if not hmac.compare_digest(client.challenge, challenge):
        return "passkey assertion was made over another challenge, not this decision's digest"
    if client.origin != evidence.origin:
        return f"passkey assertion was made on origin {client.origin!r}, not {evidence.origin!r}"
    if not hmac.compare_digest(parsed.rp_id_hash, hashlib.sha256(evidence.rp_id.encode()).digest()):
        return f"passkey assertion is for another relying party than {evidence.rp_id!r}"
    if not (parsed.flags.up and parsed.flags.uv):
        return "passkey assertion does not say the user was present and verified"
    try:
        decoded = decode_credential_public_key(b64url_decode(evidence.public_key))
        key = decoded_public_key_to_cryptography(decoded)
        verify_signature(public_key=key, signature_alg=decoded.alg, signature=signature,
                         data=auth_data + hashlib.sha256(client_json).digest())
    except InvalidSignature:
        return "passkey signature does not verify under the registered public key"
    except (ValueError, TypeError, WebAuthnException) as exc:
        return f"passkey public key or signature is unusable: {exc}"
    return None


def passkey_problem(decision: SignedDecision) -> str | None:
    """Why the decision's passkey evidence does not prove that the registered authenticator
    approved exactly this decision, or None (also None when the decision carries no passkey).
    See :func:`assertion_problem`; the challenge is :func:`decision_challenge` of ``decision``."""
    if decision.passkey is None:
        return None
    return assertion_problem(decision.passkey, challenge=decision_challenge(decision))


def state_passkey_findings(state: RunState) -> list[str]:
    """One finding per decision in ``state`` whose passkey evidence fails :func:`passkey_problem`
    (``[]`` when all hold or none has one); used by bundle verification (DESIGN.md section 4.8)."""
    findings = []
    for ref in state.review_cases:
        if ref.decision is not None:
            problem = passkey_problem(ref.decision)
            if problem:
                findings.append(f"decision on {ref.case_id}: {problem}")
    return findings
