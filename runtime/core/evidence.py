"""Signing and checking approval evidence and reviewer decisions (DESIGN.md section 6).

Both are pydantic models whose every field except ``mac`` is signed: the MAC covers the RFC 8785
canonical JSON of the model without ``mac``, under the approval or reviewer trust root. Binding
checks compare each bound field with what the runtime observes *now*, and name the first field
that differs, so a refusal says exactly why.

Framework-free: imports nothing from Django.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel

from runtime.core.canonical import DigestKind, canonical_json, digest
from runtime.core.checkpoint import ApprovalEvidence, SignedDecision
from runtime.core.signing import Keyring, Signature, TrustRoot
from runtime.errors import WrongTrustRootError

M = TypeVar("M", bound=BaseModel)


def _signed_bytes(model_fields: dict[str, Any]) -> bytes:
    return canonical_json({k: v for k, v in model_fields.items() if k != "mac"})


def _sign(model: type[M], fields: dict[str, Any], keyring: Keyring, root: TrustRoot) -> M:
    if keyring.root != root:
        raise WrongTrustRootError(f"{model.__name__} must be signed under the {root} trust root",
                                  root=keyring.root.value)
    body = {**fields, "key_id": keyring.current_key_id, "mac": "0" * 64}
    unsigned = model.model_validate(body, strict=False).model_dump(mode="json")
    signature = keyring.sign(_signed_bytes(unsigned))
    return model.model_validate({**unsigned, "mac": signature.mac}, strict=False)


def _verify(model: BaseModel, keyring: Keyring, root: TrustRoot) -> None:
    if keyring.root != root:
        raise WrongTrustRootError(f"{type(model).__name__} must be verified under the {root} trust root",
                                  root=keyring.root.value)
    data = model.model_dump(mode="json")
    keyring.verify(_signed_bytes(data), Signature(key_id=data["key_id"], mac=data["mac"]))


def new_nonce() -> str:
    """A one-time nonce: 128 random bits as 32 hex characters."""
    return secrets.token_hex(16)


def approval_sign(*, keyring: Keyring, run_id: str, idempotency_key: str, intent_digest: str,
                  environment_instance_id: str, environment_fingerprint: str, environment_version: str,
                  approver: str, ttl_seconds: float, now: datetime | None = None) -> ApprovalEvidence:
    """Issue approval evidence bound to one action and one environment state.

    Args:
        keyring: the approval trust root's keyring.
        ttl_seconds: validity in seconds (> 0); ``expires_at = issued_at + ttl``.
        now: issue time (UTC); defaults to the current time.

    Raises:
        WrongTrustRootError: ``keyring`` is not the approval root's.
        ValueError: ``ttl_seconds`` is not positive.
    """
    if ttl_seconds <= 0:
        raise ValueError("approval ttl_seconds must be > 0")
    issued = now or datetime.now(UTC)
    fields = {
        "approval_id": f"appr_{secrets.token_hex(12)}",
        "run_id": run_id,
        "idempotency_key": idempotency_key,
        "intent_digest": intent_digest,
        "environment_instance_id": environment_instance_id,
        "environment_fingerprint": environment_fingerprint,
        "environment_version": environment_version,
        "approver": approver,
        "issued_at": issued,
        "expires_at": issued + timedelta(seconds=ttl_seconds),
        "nonce": new_nonce(),
    }
    return _sign(ApprovalEvidence, fields, keyring, TrustRoot.APPROVAL)


def approval_verify(evidence: ApprovalEvidence, keyring: Keyring) -> None:
    """Check the approval's MAC (expiry and binding are checked separately).

    Raises:
        UnknownKeyError: signed by a key the approval root does not trust.
        BadSignatureError: any field was altered.
    """
    _verify(evidence, keyring, TrustRoot.APPROVAL)


def approval_digest(evidence: ApprovalEvidence) -> str:
    """Typed digest of the whole evidence, bound into adapter receipts (section 6 trust boundary)."""
    return digest(DigestKind.APPROVAL, evidence.model_dump(mode="json"))


def approval_mismatch(evidence: ApprovalEvidence, *, run_id: str, idempotency_key: str, intent_digest: str,
                      environment_instance_id: str, environment_fingerprint: str, environment_version: str
                      ) -> str | None:
    """The first bound field that differs from the current values, or None when all match."""
    expected = {
        "run_id": run_id,
        "idempotency_key": idempotency_key,
        "intent_digest": intent_digest,
        "environment_instance_id": environment_instance_id,
        "environment_fingerprint": environment_fingerprint,
        "environment_version": environment_version,
    }
    for name, value in expected.items():
        if getattr(evidence, name) != value:
            return name
    return None


def decision_sign(*, keyring: Keyring, binding: dict[str, Any]) -> SignedDecision:
    """Sign a reviewer decision. ``binding`` holds every :class:`SignedDecision` field except
    ``key_id``/``mac``; ``nonce`` and ``issued_at`` are filled in when absent.

    Raises:
        WrongTrustRootError: ``keyring`` is not the reviewer root's.
        pydantic.ValidationError: a bound field is missing or malformed.
    """
    fields = {"nonce": new_nonce(), "issued_at": datetime.now(UTC), **binding}
    return _sign(SignedDecision, fields, keyring, TrustRoot.REVIEWER)


def decision_verify(decision: SignedDecision, keyring: Keyring) -> None:
    """Check a decision's MAC under the reviewer root.

    Raises:
        UnknownKeyError: unknown signer (key id not trusted by the reviewer root).
        BadSignatureError: the decision was tampered with.
    """
    _verify(decision, keyring, TrustRoot.REVIEWER)


DECISION_BOUND_FIELDS = (
    "case_id", "task_id", "task_version", "run_id", "policy_id", "policy_version", "action_kind",
    "action_target", "idempotency_key", "pending_intent_digest", "receipt_intent_digest",
    "receipt_fingerprint", "environment_instance_id", "environment_version", "environment_fingerprint",
)


def decision_mismatch(decision: SignedDecision, expected: dict[str, Any]) -> str | None:
    """The first bound field of ``decision`` that differs from ``expected``, or None."""
    for name in DECISION_BOUND_FIELDS:
        if getattr(decision, name) != expected.get(name):
            return name
    return None
