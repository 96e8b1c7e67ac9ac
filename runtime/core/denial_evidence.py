"""Signed denials: a person refused the write a run waited on (DESIGN.md section 6.14).

A denial is signed (Ed25519) under the approval trust root, like approval evidence, over every
field but ``mac`` (RFC 8785 canonical JSON), and bound to the run, the idempotency key, the intent
digest, the plan cursor and replan epoch of the write, and the environment instance, fingerprint
and version the approver saw. ``mode`` says what the approver chose: ``stop`` ends the run failed
(the denial of old), ``continue`` tells the planner the reason as the outcome of that write and
lets the run plan its next one. It is kept in the run's receipts ledger (kind ``denied_write``,
keyed by the idempotency key, DESIGN.md section 3.1), so the signed checkpoint commits to it and
an evidence bundle carries it; verifying needs only the approval root's public keys.

Framework-free: imports nothing from Django.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AwareDatetime, StringConstraints

from runtime.core.checkpoint import Digest, Ident, NonNegInt, PendingAction, Strict
from runtime.core.evidence import _sign, _verify, new_nonce
from runtime.core.signing import Keyring, TrustRoot
from runtime.errors import SigningError

MAX_REASON_CHARS = 2000
"""Longest reason a denial carries (it is shown to a model and on the run page)."""


class DenyMode(StrEnum):
    """What a denial does to the run (DESIGN.md section 6.14)."""

    STOP = "stop"
    """The run ends failed with the reason (no side effect)."""
    CONTINUE = "continue"
    """The write never runs; the reason is the planner's outcome of it and the run goes on."""


class DenialEvidence(Strict):
    """A signed denial of one pending write (see the module docstring)."""

    denial_id: Ident
    run_id: Ident
    idempotency_key: Ident
    intent_digest: Digest
    cursor: NonNegInt
    replan_epoch: NonNegInt
    action_kind: Ident
    action_target: Annotated[str, StringConstraints(max_length=4096)]
    environment_instance_id: Ident
    environment_fingerprint: Digest
    environment_version: Ident
    approver: Ident
    reason: Annotated[str, StringConstraints(min_length=1, max_length=MAX_REASON_CHARS)]
    mode: DenyMode
    issued_at: AwareDatetime
    nonce: Ident
    key_id: Ident
    mac: Annotated[str, StringConstraints(pattern=r"^(?:[0-9a-f]{64}|[0-9a-f]{128})$")]


def denial_sign(*, keyring: Keyring, run_id: str, pending: PendingAction, environment_instance_id: str,
                environment_fingerprint: str, environment_version: str, approver: str, reason: str,
                mode: DenyMode, now: datetime) -> DenialEvidence:
    """Sign the denial of ``pending`` (DESIGN.md section 6.14).

    Args:
        keyring: the approval trust root's private keyring (the approval service's).
        pending: the write denied; its key, intent digest, cursor and epoch are bound.
        environment_*: what the approver saw (checked by the caller against the adapter now).
        reason: why, 1..:data:`MAX_REASON_CHARS` characters (the caller trims it).
        mode: :class:`DenyMode`.
        now: the database clock (DESIGN.md section 4.7).

    Raises:
        WrongTrustRootError: ``keyring`` is not the approval root's.
        KeyringError: the keyring holds only public keys.
        pydantic.ValidationError: a field is malformed (an empty or too long reason).
    """
    fields: dict[str, Any] = {
        "denial_id": f"deny_{secrets.token_hex(12)}", "run_id": run_id,
        "idempotency_key": pending.idempotency_key, "intent_digest": pending.intent_digest,
        "cursor": pending.cursor, "replan_epoch": pending.replan_epoch,
        "action_kind": pending.action.kind, "action_target": pending.action.target,
        "environment_instance_id": environment_instance_id, "environment_fingerprint": environment_fingerprint,
        "environment_version": environment_version, "approver": approver, "reason": reason,
        "mode": mode.value, "issued_at": now, "nonce": new_nonce(),
    }
    return _sign(DenialEvidence, fields, keyring, TrustRoot.APPROVAL)


def denial_verify(evidence: DenialEvidence, keyring: Keyring) -> None:
    """Check a denial's signature under the approval root (public keys suffice).

    Raises:
        UnknownKeyError: signed by a key the approval root does not trust.
        BadSignatureError: any field was altered.
    """
    _verify(evidence, keyring, TrustRoot.APPROVAL)


def denial_problem(data: object, *, keyring: Keyring, run_id: str | None = None,
                   key: str | None = None) -> str | None:
    """Why ``data`` (a denial's JSON) is not a denial of ``run_id``'s write ``key`` signed under
    the approval root, or None when it is; for ``checkpoint verify`` and bundle verification
    (DESIGN.md section 4.8). ``run_id``/``key`` None: not compared."""
    try:
        evidence = DenialEvidence.model_validate(data, strict=False)
    except ValueError:
        return "denial is malformed"
    try:
        denial_verify(evidence, keyring)
    except SigningError as exc:
        return f"denial {evidence.denial_id}: {exc.message} (key id {evidence.key_id:.64})"
    if run_id is not None and evidence.run_id != run_id:
        return f"denial {evidence.denial_id}: names another run"
    if key is not None and evidence.idempotency_key != key:
        return f"denial {evidence.denial_id}: is filed under another idempotency key"
    return None
