"""Offline checks of a reviewer's passkey assertion over a decision (DESIGN.md section 6.9).

Story: a reviewer's authenticator signs the decision's digest; an auditor holding only the
bundle checks that the registered key approved exactly this decision. A software authenticator
(an ES256 or Ed25519 key pair made here) stands in for the browser's.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from webauthn.helpers import encode_cbor

from runtime.core.checkpoint import DecisionKind, PasskeyAssertion, SignedDecision
from runtime.core.evidence import decision_sign, decision_verify
from runtime.core.passkey_evidence import (
    b64url_encode,
    decision_challenge,
    passkey_problem,
)
from runtime.core.signing import TrustRoot
from runtime.errors import BadSignatureError
from tests.factories import make_keyring

ORIGIN = "http://127.0.0.1:8000"
RP_ID = "127.0.0.1"
DIGEST = "sha256:" + "ab" * 32


class SoftAuthenticator:
    """An authenticator in software: a key pair, its COSE public key and WebAuthn assertions."""

    def __init__(self, *, eddsa: bool = False) -> None:
        self.eddsa = eddsa
        if eddsa:
            self.key = Ed25519PrivateKey.generate()
            raw = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
            self.cose = encode_cbor({1: 1, 3: -8, -1: 6, -2: raw})
        else:
            self.key = ec.generate_private_key(ec.SECP256R1())
            nums = self.key.public_key().public_numbers()
            self.cose = encode_cbor({1: 2, 3: -7, -1: 1, -2: nums.x.to_bytes(32, "big"),
                                     -3: nums.y.to_bytes(32, "big")})

    credential_id = b"soft-credential-1"

    def assert_over(self, challenge: bytes, *, rp_id: str = RP_ID, origin: str = ORIGIN,
                    flags: int = 0x05, count: int = 1) -> dict[str, str]:
        """Evidence fields (:class:`PasskeyAssertion`) of an assertion over ``challenge``."""
        auth_data = hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + count.to_bytes(4, "big")
        client = json.dumps({"type": "webauthn.get", "challenge": b64url_encode(challenge),
                             "origin": origin, "crossOrigin": False}).encode()
        signed = auth_data + hashlib.sha256(client).digest()
        signature = self.key.sign(signed) if self.eddsa else self.key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return {"credential_id": b64url_encode(self.credential_id), "public_key": b64url_encode(self.cose),
                "authenticator_data": b64url_encode(auth_data), "client_data_json": b64url_encode(client),
                "signature": b64url_encode(signature), "rp_id": rp_id, "origin": origin}

    def assertion_json(self, challenge: bytes, **kwargs) -> dict:  # type: ignore[no-untyped-def]
        """What ``PublicKeyCredential.toJSON()`` gives for an assertion over ``challenge``."""
        fields = self.assert_over(challenge, **kwargs)
        cid = b64url_encode(self.credential_id)
        return {"id": cid, "rawId": cid, "type": "public-key", "clientExtensionResults": {},
                "response": {"clientDataJSON": fields["client_data_json"],
                             "authenticatorData": fields["authenticator_data"],
                             "signature": fields["signature"]}}

    def registration_json(self, challenge: bytes, *, rp_id: str = RP_ID, origin: str = ORIGIN) -> dict:
        """What ``PublicKeyCredential.toJSON()`` gives for a creation ("none" attestation)."""
        auth_data = (hashlib.sha256(rp_id.encode()).digest() + bytes([0x45]) + (0).to_bytes(4, "big")
                     + bytes(16) + len(self.credential_id).to_bytes(2, "big") + self.credential_id + self.cose)
        client = json.dumps({"type": "webauthn.create", "challenge": b64url_encode(challenge),
                             "origin": origin, "crossOrigin": False}).encode()
        attestation = encode_cbor({"fmt": "none", "attStmt": {}, "authData": auth_data})
        cid = b64url_encode(self.credential_id)
        return {"id": cid, "rawId": cid, "type": "public-key", "clientExtensionResults": {},
                "response": {"clientDataJSON": b64url_encode(client),
                             "attestationObject": b64url_encode(attestation), "transports": ["internal"]}}


def _fields() -> dict:
    return {
        "case_id": "case_1", "decision": "abort", "reviewer": "rita", "task_id": "t", "task_version": "1",
        "run_id": "run_1", "policy_id": "p", "policy_version": "1", "action_kind": None,
        "action_target": None, "idempotency_key": None, "pending_intent_digest": None,
        "receipt_intent_digest": None, "receipt_fingerprint": None, "environment_instance_id": "env",
        "environment_version": "v1", "environment_fingerprint": DIGEST, "nonce": "n" * 32,
        "issued_at": datetime(2026, 1, 1, tzinfo=UTC),
    }


def _passkey_decision(authenticator: SoftAuthenticator, **assert_kwargs) -> SignedDecision:
    keyring = make_keyring(TrustRoot.REVIEWER)
    unsigned = SignedDecision.model_validate(
        {**_fields(), "key_id": keyring.current_key_id, "mac": "0" * 64}, strict=False)
    evidence = authenticator.assert_over(decision_challenge(unsigned), **assert_kwargs)
    return decision_sign(keyring=keyring, binding={**_fields(), "passkey": evidence})


def test_it_accepts_an_assertion_over_the_decision_digest():
    for authenticator in (SoftAuthenticator(), SoftAuthenticator(eddsa=True)):
        decision = _passkey_decision(authenticator)
        assert passkey_problem(decision) is None


def test_it_refuses_an_assertion_over_another_challenge():
    authenticator = SoftAuthenticator()
    decision = _passkey_decision(authenticator)
    other = authenticator.assert_over(hashlib.sha256(b"another decision").digest())
    forged = decision.model_copy(update={"passkey": PasskeyAssertion.model_validate(other)})
    assert "another challenge" in passkey_problem(forged)


def test_it_refuses_a_decision_changed_after_the_assertion():
    decision = _passkey_decision(SoftAuthenticator())
    changed = decision.model_copy(update={"decision": DecisionKind.REPLAN})
    assert "another challenge" in passkey_problem(changed)


def test_it_refuses_an_assertion_checked_with_another_key():
    decision = _passkey_decision(SoftAuthenticator())
    wrong_key = SoftAuthenticator().assert_over(b"x")["public_key"]
    swapped = decision.passkey.model_copy(update={"public_key": wrong_key})
    assert "does not verify" in passkey_problem(decision.model_copy(update={"passkey": swapped}))


def test_it_refuses_a_bad_signature():
    decision = _passkey_decision(SoftAuthenticator())
    raw = bytearray(decision.passkey.signature.encode())
    raw[-6] = ord("A") if raw[-6] != ord("A") else ord("B")
    bad = decision.passkey.model_copy(update={"signature": raw.decode()})
    assert passkey_problem(decision.model_copy(update={"passkey": bad})) is not None


def test_it_refuses_another_origin_or_relying_party_or_no_user_verification():
    authenticator = SoftAuthenticator()
    decision = _passkey_decision(authenticator)
    moved = decision.passkey.model_copy(update={"origin": "https://evil.example"})
    assert "origin" in passkey_problem(decision.model_copy(update={"passkey": moved}))
    assert "relying party" in passkey_problem(_passkey_decision(authenticator, rp_id="evil.example")
                                              .model_copy(update={"passkey": decision.passkey.model_copy(
                                                  update={"rp_id": "evil.example"})}))
    unverified = _passkey_decision(authenticator, flags=0x01)
    assert "verified" in passkey_problem(unverified)


def test_it_keeps_decisions_without_a_passkey_byte_identical():
    keyring = make_keyring(TrustRoot.REVIEWER)
    plain = decision_sign(keyring=keyring, binding=_fields())
    dumped = plain.model_dump(mode="json")
    assert "passkey" not in dumped
    reloaded = SignedDecision.model_validate(dumped, strict=False)
    decision_verify(reloaded, keyring.public())
    assert "passkey" in reloaded.model_fields_set
    assert passkey_problem(plain) is None


def test_it_breaks_the_reviewer_signature_when_the_passkey_is_stripped():
    keyring = make_keyring(TrustRoot.REVIEWER)
    unsigned = SignedDecision.model_validate({**_fields(), "key_id": keyring.current_key_id,
                                              "mac": "0" * 64}, strict=False)
    evidence = SoftAuthenticator().assert_over(decision_challenge(unsigned))
    decision = decision_sign(keyring=keyring, binding={**_fields(), "passkey": evidence})
    decision_verify(decision, keyring.public())
    stripped = SignedDecision.model_validate({**decision.model_dump(mode="json"), "passkey": None}, strict=False)
    with pytest.raises(BadSignatureError):
        decision_verify(stripped, keyring.public())
