"""An approver's amendment of a waiting write: the signed record and what a planner is told (DESIGN.md section 6.13).

An approver with the amend permission may change the arguments of a write that waits for an
approval before approving it. The amended action replaces the pending one in the same checkpoint
that carries the approval bound to the amended intent; the original is sealed into the trace as
superseded. :class:`AmendmentRecord` is what the approval service signs (under the approval trust
root, like approval evidence) to say who replaced which intent by which; it travels in the trace
event ``intent.amended`` and so in every evidence bundle, where :func:`amendment_findings` checks
it offline with public keys only. :class:`WriteAmendment` is what the engine hands a planner when
the write at the previous cursor executed with arguments other than those it proposed.

Framework-free: nothing here imports Django.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Annotated, Any

from pydantic import AwareDatetime, StringConstraints, ValidationError

from runtime.core.checkpoint import Action, ApprovalEvidence, Digest, Ident, NonNegInt, Strict
from runtime.core.evidence import _sign, _verify
from runtime.core.signing import Keyring, TrustRoot
from runtime.errors import RatchetError

AMENDED_EVENT = "intent.amended"
"""The trace event that seals the superseded action and carries the signed record."""

Note = Annotated[str, StringConstraints(max_length=500)]


class AmendmentRecord(Strict):
    """Signed statement that ``approver`` replaced the intent ``proposed_intent_digest`` of the write
    under ``idempotency_key`` by ``amended_intent_digest``, approved as ``approval_id``.

    Signed under the approval trust root over every field except ``mac`` (DESIGN.md section 6.13).
    """

    amendment_id: Ident
    run_id: Ident
    idempotency_key: Ident
    cursor: NonNegInt
    proposed_intent_digest: Digest
    amended_intent_digest: Digest
    approval_id: Ident
    approver: Ident
    amended_at: AwareDatetime
    note: Note = ""
    key_id: Ident
    mac: Annotated[str, StringConstraints(pattern=r"^(?:[0-9a-f]{64}|[0-9a-f]{128})$")]


def amendment_sign(*, keyring: Keyring, run_id: str, idempotency_key: str, cursor: int,
                   proposed_intent_digest: str, amended_intent_digest: str, approval_id: str,
                   approver: str, amended_at: datetime, note: str = "") -> AmendmentRecord:
    """Sign the record of one amendment.

    Args:
        keyring: the approval trust root's private keyring (only the approval service holds it).
        amended_at: the database clock's time of the amendment (DESIGN.md section 4.7).
        note: the approver's reason, at most 500 characters.

    Raises:
        WrongTrustRootError: ``keyring`` is not the approval root's.
        KeyringError: the keyring holds only public keys.
    """
    fields = {"amendment_id": f"amd_{secrets.token_hex(12)}", "run_id": run_id, "idempotency_key": idempotency_key,
              "cursor": cursor, "proposed_intent_digest": proposed_intent_digest,
              "amended_intent_digest": amended_intent_digest, "approval_id": approval_id, "approver": approver,
              "amended_at": amended_at, "note": note}
    return _sign(AmendmentRecord, fields, keyring, TrustRoot.APPROVAL)


def amendment_verify(record: AmendmentRecord, keyring: Keyring) -> None:
    """Check the record's signature with the approval root's (public) keys.

    Raises:
        WrongTrustRootError: ``keyring`` is not the approval root's.
        UnknownKeyError / BadSignatureError: signed by a key the root does not trust, or altered.
    """
    _verify(record, keyring, TrustRoot.APPROVAL)


def amendment_findings(payload: Mapping[str, Any], keyring: Keyring, *, where: str) -> list[str]:
    """What is wrong with one ``intent.amended`` trace payload, offline (``[]``: nothing).

    Checks the record's signature, that the superseded action hashes to the record's proposed
    intent and the amended action to its amended intent, and that the approval the event carries
    is the one the record names and is bound to the amended intent and the same key.
    """
    try:
        record = AmendmentRecord.model_validate(payload.get("amendment"), strict=False)
        amendment_verify(record, keyring)
        superseded = Action.model_validate((payload.get("superseded") or {}).get("action"), strict=False)
        amended = Action.model_validate(payload.get("action"), strict=False)
        approval = ApprovalEvidence.model_validate(payload.get("approval"), strict=False)
    except ValidationError:
        return [f"{where}: amendment is malformed"]
    except RatchetError as exc:
        return [f"{where}: amendment: {exc.message}"]
    problems = []
    if superseded.intent_digest() != record.proposed_intent_digest:
        problems.append("the superseded action does not hash to the proposed intent")
    if amended.intent_digest() != record.amended_intent_digest:
        problems.append("the amended action does not hash to the amended intent")
    if (approval.approval_id != record.approval_id or approval.intent_digest != record.amended_intent_digest
            or approval.idempotency_key != record.idempotency_key or approval.run_id != record.run_id):
        problems.append("the approval is not the one bound to the amended intent")
    return [f"{where}: amendment {record.amendment_id}: {p}" for p in problems]


@dataclass(frozen=True)
class WriteAmendment:
    """What a planner is told when the write it proposed at ``cursor`` ran with other arguments.

    Attributes:
        cursor: the plan cursor of the amended write (the one before the proposal now asked for).
        idempotency_key: its key (unchanged by the amendment).
        proposed: the action the planner proposed, as JSON (``kind``, ``target``, ``params``, ``risk``).
        executed: the action that executed instead, as JSON.
        proposed_intent_digest, executed_intent_digest: their intent digests.
        amended_by: the approver who amended it.
        note: the approver's reason ("" when none was given).
    """

    cursor: int
    idempotency_key: str
    proposed: dict[str, Any]
    executed: dict[str, Any]
    proposed_intent_digest: str
    executed_intent_digest: str
    amended_by: str
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        """The amendment as a JSON object (what the chat-tools planner puts in the tool result)."""
        return asdict(self)
