"""Signing and checking approval evidence and reviewer decisions (DESIGN.md section 6.2).

Both are pydantic models whose every field except ``mac`` is signed: the Ed25519 signature (the
``mac`` field, 128 hex characters) covers the RFC 8785 canonical JSON of the model without
``mac``, under the approval or reviewer trust root; verifiers need only the public keys
(DESIGN.md section 4.1). Binding
checks compare each bound field with what the runtime observes *now*, and name the first field
that differs, so a refusal says exactly why.

Framework-free: imports nothing from Django.
"""

from __future__ import annotations

import math
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel

from runtime.core.canonical import DigestKind, canonical_json, digest
from runtime.core.checkpoint import ApprovalEvidence, RunState, SignedDecision
from runtime.core.signing import Keyring, Signature, TrustRoot
from runtime.errors import ApprovalTtlError, SigningError, WrongTrustRootError

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
                  approver: str, ttl_seconds: float, now: datetime | None = None,
                  max_ttl_seconds: float | None = None, comment: str | None = None) -> ApprovalEvidence:
    """Issue approval evidence bound to one action and one environment state.

    Args:
        keyring: the approval trust root's private keyring (the approval service's).
        ttl_seconds: validity in seconds, finite, in ``(0, max_ttl_seconds]``;
            ``expires_at = issued_at + ttl``.
        now: issue time (UTC); the caller passes the database clock (DESIGN.md section 4.7).
        max_ttl_seconds: the configured maximum validity (None: no maximum).
        comment: the approver's optional comment (at most 2,000 characters), signed with the
            rest; None or empty: none (DESIGN.md section 6.15).

    Raises:
        WrongTrustRootError: ``keyring`` is not the approval root's.
        KeyringError: the keyring holds only public keys (a worker cannot mint approvals).
        ApprovalTtlError (a ValueError): ``ttl_seconds`` is not finite, not positive, or above
            the maximum.
    """
    approval_ttl_check(ttl_seconds, max_ttl_seconds=max_ttl_seconds)
    issued = now or datetime.now(UTC)
    fields: dict[str, Any] = {
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
    if comment:
        fields["comment"] = comment
    return _sign(ApprovalEvidence, fields, keyring, TrustRoot.APPROVAL)


def approval_ttl_check(ttl_seconds: object, *, max_ttl_seconds: float | None) -> float:
    """``ttl_seconds`` as a float if it is a finite number of seconds in ``(0, max]``.

    Raises:
        ApprovalTtlError: anything else (``inf``, ``nan``, ``-1``, above the maximum, not a number).
    """
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int | float):
        raise ApprovalTtlError("approval validity is not a number of seconds")
    value = float(ttl_seconds)
    if not math.isfinite(value) or value <= 0:
        raise ApprovalTtlError(f"approval validity must be a finite, positive number of seconds, not {value}")
    if max_ttl_seconds is not None and value > max_ttl_seconds:
        raise ApprovalTtlError(f"approval validity {value:g} s is above the configured maximum "
                               f"{max_ttl_seconds:g} s (RATCHET_APPROVAL_MAX_SECONDS)")
    return value


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


DECISION_DEFAULT_SECONDS = 3600.0
"""Validity a decision is signed with when the caller names none (``RATCHET_DECISION_SECONDS``'s default)."""


def decision_sign(*, keyring: Keyring, binding: dict[str, Any],
                  validity_seconds: float | None = DECISION_DEFAULT_SECONDS) -> SignedDecision:
    """Sign a reviewer decision with a private reviewer key (the reviewer role's or a person's).

    Args:
        binding: every :class:`SignedDecision` field except ``key_id``/``mac``; ``nonce`` and
            ``issued_at`` are filled in when absent, and ``expires_at`` (signed like every other
            field) as ``issued_at + validity_seconds`` -- unless the binding carries a
            ``passkey``: the authenticator signed the fields as they are, so the caller fixes
            the expiry before the challenge (``review.passkeys``) and nothing is added here.
        validity_seconds: finite, positive seconds (DESIGN.md section 6.3); None signs no expiry
            (only to reproduce decisions made before the field existed: they are never applied).

    Raises:
        WrongTrustRootError: ``keyring`` is not the reviewer root's.
        ValueError: ``validity_seconds`` is not a finite, positive number.
        pydantic.ValidationError: a bound field is missing or malformed.
    """
    fields = {"nonce": new_nonce(), "issued_at": datetime.now(UTC), **binding}
    if fields.get("expires_at") is None and validity_seconds is not None and fields.get("passkey") is None:
        if not math.isfinite(validity_seconds) or validity_seconds <= 0:
            raise ValueError("decision validity must be a finite, positive number of seconds")
        issued = fields["issued_at"]
        if isinstance(issued, str):
            issued = datetime.fromisoformat(issued)
        fields["expires_at"] = issued + timedelta(seconds=validity_seconds)
    return _sign(SignedDecision, fields, keyring, TrustRoot.REVIEWER)


def decision_expires_at(decision: SignedDecision, *, validity_seconds: float) -> datetime | None:
    """When a signed decision stops being usable (DESIGN.md section 6.3): its signed
    ``expires_at``, cut to ``issued_at + validity_seconds`` when the configured validity has been
    lowered since; None when it carries no signed expiry (made before the field existed: never
    applied). The caller compares it with the database clock."""
    if decision.expires_at is None:
        return None
    return min(decision.expires_at, decision.issued_at + timedelta(seconds=validity_seconds))


def decision_expiry_problem(decision: SignedDecision) -> str | None:
    """Why a decision's signed validity is impossible (it ends before it begins), or None.
    Checked by ``checkpoint verify`` and ``verify_bundle`` beside the signature that covers it."""
    if decision.expires_at is not None and decision.expires_at <= decision.issued_at:
        return "expires before it was issued"
    return None


def decision_verify(decision: SignedDecision, keyring: Keyring) -> None:
    """Check a decision's MAC under the reviewer root.

    Raises:
        UnknownKeyError: unknown signer (key id not trusted by the reviewer root).
        BadSignatureError: the decision was tampered with.
    """
    _verify(decision, keyring, TrustRoot.REVIEWER)


def reviewer_name_problem(decision: SignedDecision, names: dict[str, str]) -> str | None:
    """Why ``decision`` names a reviewer its key is not bound to, or None. ``names`` maps the key
    ids of people's own reviewer keys to their names (DESIGN.md section 6.3); the reviewer role's
    key (the dashboard's) is bound to no name."""
    bound = names.get(decision.key_id)
    if bound is not None and bound != decision.reviewer:
        return f"signed with {bound}'s key but names {decision.reviewer} as the reviewer"
    return None


def state_evidence_findings(state: RunState, *, approval: Keyring, reviewer: Keyring,
                            reviewer_names: dict[str, str] | None = None) -> list[str]:
    """Check every approval (current and sealed) and every reviewer decision a run state holds,
    with public keys only; one finding per failure, ``[]`` when all verify (DESIGN.md section 4.8).

    Args:
        state: a checkpoint's run state.
        approval, reviewer: the verifying keyrings of those roots (public keys suffice).
        reviewer_names: key id -> bound reviewer name (see :func:`reviewer_name_problem`).
    """
    findings: list[str] = []
    if state.pending is not None:
        held = [*state.pending.sealed_approvals]
        if state.pending.approval is not None:
            held.append(state.pending.approval)
        for evidence in held:
            try:
                approval_verify(evidence, approval)
            except SigningError as exc:
                findings.append(f"approval {evidence.approval_id}: {exc.message} (key id {evidence.key_id:.64})")
            if evidence.expires_at <= evidence.issued_at:
                findings.append(f"approval {evidence.approval_id}: expires before it was issued")
    for ref in state.review_cases:
        if ref.decision is None:
            continue
        try:
            decision_verify(ref.decision, reviewer)
        except SigningError as exc:
            findings.append(f"decision on {ref.case_id}: {exc.message} (key id {ref.decision.key_id:.64})")
            continue
        for problem in (reviewer_name_problem(ref.decision, reviewer_names or {}),
                        decision_expiry_problem(ref.decision)):
            if problem:
                findings.append(f"decision on {ref.case_id}: {problem}")
    return findings


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
