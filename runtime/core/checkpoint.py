"""Typed, versioned checkpoint schema (DESIGN.md section 3) and its signed envelope (section 4).

A checkpoint is a :class:`RunState` inside a :class:`CheckpointEnvelope`. Every model forbids
unknown fields and uses strict types, so a checkpoint written by a different version of the code,
or edited by hand, fails loudly instead of being half-understood. Large observations never live
here: they are content-addressed attachments referenced by ``sha256:`` digest.

Serialisation is always ``model_dump(mode="json")`` -> RFC 8785 canonical JSON; never pickle
(the first failure named in the sources).

Public entry points:
    :func:`validate_state`  schema round trip + serialisability + cross-object invariants.
    :func:`seal`            validate, wrap in an envelope and sign with the checkpoint keyring.
    :func:`open_envelope`   parse, verify the MAC, migrate old schema versions, validate.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    ValidationError,
)

from runtime.core.canonical import DigestKind, canonical_json, digest, digest_bytes
from runtime.core.signing import Keyring, Signature, TrustRoot
from runtime.errors import (
    CanonicalizationError,
    CheckpointCorruptError,
    CheckpointInvariantError,
    CheckpointMigrationError,
    CheckpointSchemaError,
)

SCHEMA_VERSION = 2
"""The schema version this code writes. Older versions are migrated by ``runtime.core.migrators``."""

Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Ident = Annotated[str, StringConstraints(min_length=1, max_length=200)]
NonNegInt = Annotated[int, Field(ge=0)]
NonNegFloat = Annotated[float, Field(ge=0)]


class Strict(BaseModel):
    """Base: unknown fields forbidden, strict types, validated on assignment."""

    model_config = ConfigDict(extra="forbid", strict=True, validate_assignment=True)


class Phase(StrEnum):
    """Run phases (DESIGN.md section 6 state machine, plus waiting for a human approval)."""

    RUNNING = "running"
    PENDING = "pending"
    AWAITING_APPROVAL = "awaiting_approval"
    NEEDS_REVIEW = "needs_review"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_PHASES = frozenset({Phase.COMPLETED, Phase.FAILED, Phase.CANCELLED})


class StopReason(StrEnum):
    """Why a run stopped or froze; shown to operators."""

    VERIFIED = "verified"
    VERIFIER_FAILED = "verifier_failed"
    BUDGET_EXHAUSTED = "budget_exhausted"
    CANCELLED = "cancelled"
    APPROVAL_REQUIRED = "approval_required"
    APPROVAL_EXPIRED = "approval_expired"
    APPROVAL_DENIED = "approval_denied"
    RECEIPT_CONFLICT = "receipt_conflict"
    RECEIPT_DRIFT = "receipt_drift"
    RECEIPT_MISSING = "receipt_missing"
    UNTRUSTED_RECEIPT = "untrusted_receipt"
    ENVIRONMENT_DRIFT = "environment_drift"
    OUTCOME_UNKNOWN = "outcome_unknown"
    POLICY_VIOLATION = "policy_violation"
    ABORTED_BY_REVIEWER = "aborted_by_reviewer"


class Risk(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


# --- identity and versions ------------------------------------------------------------------


class RunIdentity(Strict):
    """Who the run is and the fingerprint of its externally fixed scenario."""

    run_id: Ident
    tenant_id: Ident
    task_id: Ident
    task_version: Ident
    policy_id: Ident
    policy_version: Ident
    scenario_fingerprint: Digest


class VersionSet(Strict):
    """The version combination the run started with; a resume under another one is refused."""

    model: Ident
    prompt: Ident
    rules: Ident
    tool_schema: Ident
    inputs: dict[str, str] = Field(default_factory=dict)
    """Input fingerprints: document versions, code SHA, resource ETags (name -> version)."""


class BudgetLimits(Strict):
    """Budget ceilings. Units: counts, seconds of wall time, cost in micro-units (1e-6 of a currency unit)."""

    proposals: NonNegInt
    steps: NonNegInt
    wall_seconds: NonNegFloat
    cost_micros: NonNegInt


class BudgetUsage(Strict):
    """Budget used so far, same units as :class:`BudgetLimits`."""

    proposals: NonNegInt = 0
    steps: NonNegInt = 0
    wall_seconds: NonNegFloat = 0.0
    cost_micros: NonNegInt = 0


# --- environment, actions, receipts ---------------------------------------------------------


class EnvironmentRef(Strict):
    """What was observed of the real environment; never a pretend copy of it.

    ``version`` is the adapter's own revision (a git HEAD, a journal sequence); ``state_fingerprint``
    is a digest of the content; ``instance_id`` names the concrete environment instance.
    """

    adapter_kind: Ident
    instance_id: Ident
    version: Ident
    state_fingerprint: Digest
    adapter_generation: NonNegInt = 0
    observation_version: NonNegInt = 0
    attachments: list[Digest] = Field(default_factory=list)


class Action(Strict):
    """A proposed write. ``params`` is JSON; file content is referenced by attachment digest."""

    kind: Ident
    target: Annotated[str, StringConstraints(max_length=4096)] = ""
    params: dict[str, JsonValue] = Field(default_factory=dict)
    risk: Risk = Risk.LOW

    def intent_digest(self) -> str:
        """Canonical intent digest: what the action does, independent of who asks or when."""
        return digest(DigestKind.INTENT, self.model_dump(mode="json"))


class Receipt(Strict):
    """The adapter's authoritative evidence that a write committed (DESIGN.md section 5).

    Fields beyond identity support the trust boundary of section 6: ``approval_digest``,
    ``committed_at`` and ``business_object`` are bound by adapters that enforce expiry themselves.
    """

    namespace: Ident
    adapter_version: Ident
    receipt_id: Ident
    idempotency_key: Ident
    intent_digest: Digest
    result: dict[str, JsonValue] = Field(default_factory=dict)
    environment_version_after: Ident
    fencing_token: NonNegInt
    committed_at: AwareDatetime | None = None
    approval_digest: Digest | None = None
    business_object: str | None = None

    def fingerprint(self) -> str:
        """Canonical fingerprint over every field of the receipt."""
        return digest(DigestKind.RECEIPT, self.model_dump(mode="json"))


class ApprovalEvidence(Strict):
    """Signed approval bound to one exact action and environment (DESIGN.md section 6).

    Signed under the approval trust root over every field except ``mac``. Expired evidence still
    loads (it is not corruption) but never authorises execution.
    """

    approval_id: Ident
    run_id: Ident
    idempotency_key: Ident
    intent_digest: Digest
    environment_instance_id: Ident
    environment_fingerprint: Digest
    environment_version: Ident
    approver: Ident
    issued_at: AwareDatetime
    expires_at: AwareDatetime
    nonce: Ident
    key_id: Ident
    mac: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class PendingAction(Strict):
    """The write in flight: checkpointed before any side effect."""

    action: Action
    intent_digest: Digest
    idempotency_key: Ident
    cursor: NonNegInt
    replan_epoch: NonNegInt
    pre_state: EnvironmentRef
    expected_post_fingerprint: Digest | None = None
    requires_approval: bool = False
    approval: ApprovalEvidence | None = None
    sealed_approvals: list[ApprovalEvidence] = Field(default_factory=list)
    proposed_at: AwareDatetime
    attempts: NonNegInt = 0


class ExecutedWrite(Strict):
    """A committed write: the key, the full receipt and its fingerprint, a short result summary."""

    idempotency_key: Ident
    intent_digest: Digest
    cursor: NonNegInt
    receipt: Receipt
    receipt_fingerprint: Digest
    result_summary: Annotated[str, StringConstraints(max_length=2000)] = ""
    reconciled: bool = False
    """True when the receipt was recovered from the adapter rather than returned by our call."""


class Precondition(Strict):
    """Something re-checked before resuming, e.g. ``kind="environment_instance"``."""

    kind: Ident
    expected: Annotated[str, StringConstraints(max_length=4096)]


class Scope(Strict):
    """What the run may do: allowlists, permissions, acting identity and policy version."""

    allowed_actions: list[Ident]
    allowed_paths: list[Annotated[str, StringConstraints(max_length=4096)]]
    permissions: list[Ident] = Field(default_factory=list)
    approval_risks: list[Risk] = Field(default_factory=list)
    principal: Ident
    policy_version: Ident
    preconditions: list[Precondition] = Field(default_factory=list)


class VerifierResult(Strict):
    """A verifier verdict and the exact environment version it refers to."""

    environment_version: Ident
    environment_fingerprint: Digest
    passed: bool
    detail: Annotated[str, StringConstraints(max_length=4000)] = ""
    at: AwareDatetime


class ReviewCaseStatus(StrEnum):
    OPEN = "open"
    REPLANNED = "replanned"
    ABORTED = "aborted"


class ReviewCaseRef(Strict):
    """An open or closed review case as the checkpoint sees it (full evidence lives in the case)."""

    case_id: Ident
    reason: StopReason
    status: ReviewCaseStatus = ReviewCaseStatus.OPEN
    idempotency_key: Ident
    intent_digest: Digest
    receipt: Receipt | None = None
    receipt_fingerprint: Digest | None = None
    environment_version: Ident
    opened_at: AwareDatetime


class RunState(Strict):
    """Everything needed to resume a run exactly (DESIGN.md section 3)."""

    identity: RunIdentity
    versions: VersionSet
    phase: Phase
    stop_reason: StopReason | None = None
    stop_detail: Annotated[str, StringConstraints(max_length=4000)] = ""
    cursor: NonNegInt = 0
    replan_epoch: NonNegInt = 0
    limits: BudgetLimits
    usage: BudgetUsage = Field(default_factory=BudgetUsage)
    environment: EnvironmentRef
    pending: PendingAction | None = None
    executed: list[ExecutedWrite] = Field(default_factory=list)
    scope: Scope
    verifier_results: list[VerifierResult] = Field(default_factory=list)
    review_cases: list[ReviewCaseRef] = Field(default_factory=list)
    consumed_nonces: list[Ident] = Field(default_factory=list)
    quarantined_keys: list[Ident] = Field(default_factory=list)
    planner_state: dict[str, JsonValue] = Field(default_factory=dict)
    started_at: AwareDatetime


class CheckpointEnvelope(Strict):
    """Signed wrapper: schema version, identity, generation, key id and MAC around the state."""

    schema_version: Literal[2]
    run_id: Ident
    tenant_id: Ident
    task_id: Ident
    environment_instance_id: Ident
    generation: Annotated[int, Field(ge=1)]
    created_at: AwareDatetime
    key_id: Ident
    mac: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    payload: RunState


# --- validation -----------------------------------------------------------------------------


def _schema_error(exc: ValidationError, **context: Any) -> CheckpointSchemaError:
    first = exc.errors(include_url=False, include_input=False)[:5]
    where = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in first)
    return CheckpointSchemaError(f"checkpoint does not match schema v{SCHEMA_VERSION}: {where}", **context)


def validate_state(state: RunState) -> RunState:
    """Round-trip ``state`` through canonical JSON and strict validation, then check invariants.

    Returns a fresh, independent copy. This runs *before* any generation is advanced (DESIGN.md
    section 4: an invalid state must never invalidate the last good one).

    Raises:
        CanonicalizationError: a value cannot be serialised as canonical JSON.
        CheckpointSchemaError: a field has the wrong type or an unknown field is present.
        CheckpointInvariantError: cross-object invariants fail (see :func:`check_invariants`).
    """
    try:
        raw = canonical_json(state.model_dump(mode="json"))
    except CanonicalizationError:
        raise
    except (TypeError, ValueError) as exc:  # pydantic serialisation errors
        raise CanonicalizationError(f"state is not serialisable: {exc}") from None
    try:
        copy = RunState.model_validate_json(raw)
    except ValidationError as exc:
        raise _schema_error(exc, run_id=state.identity.run_id) from None
    check_invariants(copy)
    return copy


def _fail(message: str, state: RunState) -> None:
    raise CheckpointInvariantError(message, run_id=state.identity.run_id)


def check_invariants(state: RunState) -> None:
    """Cross-object invariants of a run state. Explicit checks, never ``assert``.

    Raises:
        CheckpointInvariantError: naming the first broken invariant.
    """
    if state.phase in (Phase.PENDING, Phase.AWAITING_APPROVAL) and state.pending is None:
        _fail(f"phase {state.phase} needs a pending action", state)
    if state.phase == Phase.RUNNING and state.pending is not None:
        _fail("a running run has no pending action; pending writes put it in phase pending", state)
    if state.phase == Phase.NEEDS_REVIEW and not any(
        c.status == ReviewCaseStatus.OPEN for c in state.review_cases
    ):
        _fail("phase needs_review requires an open review case", state)
    if state.phase in TERMINAL_PHASES and state.stop_reason is None:
        _fail(f"terminal phase {state.phase} needs a stop_reason", state)
    if state.phase == Phase.COMPLETED:
        last = state.verifier_results[-1] if state.verifier_results else None
        if last is None or not last.passed or last.environment_version != state.environment.version:
            _fail("completion needs a passing verifier result at the final environment version", state)

    keys = [w.idempotency_key for w in state.executed]
    if len(keys) != len(set(keys)):
        _fail("an idempotency key appears twice among executed writes", state)
    for write in state.executed:
        if write.receipt.idempotency_key != write.idempotency_key:
            _fail(f"receipt of {write.idempotency_key} carries another key", state)
        if write.receipt.intent_digest != write.intent_digest:
            _fail(f"receipt of {write.idempotency_key} is for another intent", state)
        if write.receipt.fingerprint() != write.receipt_fingerprint:
            _fail(f"receipt fingerprint of {write.idempotency_key} does not match the receipt", state)

    pending = state.pending
    if pending is not None:
        if pending.intent_digest != pending.action.intent_digest():
            _fail("pending intent digest does not match the pending action", state)
        if pending.idempotency_key in state.quarantined_keys:
            _fail("pending action uses a quarantined idempotency key", state)
        if pending.idempotency_key in keys:
            _fail("pending action reuses the key of an executed write", state)
        if pending.pre_state.instance_id != state.environment.instance_id:
            _fail("pending pre-state is bound to another environment instance", state)
        if pending.approval is not None and (
            pending.approval.idempotency_key != pending.idempotency_key
            or pending.approval.intent_digest != pending.intent_digest
            or pending.approval.run_id != state.identity.run_id
        ):
            _fail("approval evidence is bound to another action", state)

    if len(state.consumed_nonces) != len(set(state.consumed_nonces)):
        _fail("a consumed nonce appears twice", state)
    case_ids = [c.case_id for c in state.review_cases]
    if len(case_ids) != len(set(case_ids)):
        _fail("a review case id appears twice", state)

    for name in ("proposals", "steps", "cost_micros"):
        if getattr(state.usage, name) > getattr(state.limits, name):
            _fail(f"budget usage {name} exceeds its limit", state)
    if state.scope.policy_version != state.identity.policy_version:
        _fail("scope policy version differs from the run's policy version", state)


# --- sealing and opening --------------------------------------------------------------------


def _signed_bytes(envelope_without_mac: dict[str, Any]) -> bytes:
    return canonical_json(envelope_without_mac)


def seal(state: RunState, *, generation: int, keyring: Keyring, created_at: datetime | None = None
         ) -> tuple[bytes, CheckpointEnvelope]:
    """Validate ``state`` and return ``(envelope_bytes, envelope)`` signed for ``generation``.

    Args:
        state: the run state to checkpoint.
        generation: the generation this checkpoint will have (HWM + 1), >= 1.
        keyring: the checkpoint trust root's keyring (signs with its current key).
        created_at: timestamp to record (UTC); defaults to now.

    Raises:
        CanonicalizationError, CheckpointSchemaError, CheckpointInvariantError: from
            :func:`validate_state`; nothing is signed then.
        ValueError: the keyring is not the checkpoint trust root's.
    """
    if keyring.root != TrustRoot.CHECKPOINT:
        raise ValueError("checkpoints must be signed with the checkpoint trust root")
    clean = validate_state(state)
    body: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run_id": clean.identity.run_id,
        "tenant_id": clean.identity.tenant_id,
        "task_id": clean.identity.task_id,
        "environment_instance_id": clean.environment.instance_id,
        "generation": generation,
        "created_at": (created_at or datetime.now(UTC)).isoformat(),
        "key_id": keyring.current_key_id,
        "payload": clean.model_dump(mode="json"),
    }
    signature = keyring.sign(_signed_bytes(body))
    body["mac"] = signature.mac
    raw = canonical_json(body)
    try:
        envelope = CheckpointEnvelope.model_validate_json(raw)
    except ValidationError as exc:
        raise _schema_error(exc, run_id=clean.identity.run_id, generation=generation) from None
    return raw, envelope


def envelope_digest(raw: bytes) -> str:
    """Digest of the stored envelope bytes; the HWM records it so restore loads exactly these bytes."""
    return digest_bytes(raw)


def open_envelope(raw: bytes, *, keyring: Keyring) -> CheckpointEnvelope:
    """Parse, authenticate, migrate and validate stored envelope bytes.

    Order matters: the MAC is checked over the bytes as written (any schema version) before any
    migration runs, so a forged old-version checkpoint is never migrated into a trusted one.

    Raises:
        CheckpointCorruptError: not JSON, or not an object with the envelope's signed fields.
        UnknownKeyError / BadSignatureError: the MAC does not verify under ``keyring``.
        CheckpointMigrationError: the schema version is unknown or has no migrator.
        CheckpointSchemaError / CheckpointInvariantError: the migrated payload is invalid.
    """
    from runtime.core.migrators import migrate_envelope  # local: migrators import this module

    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise CheckpointCorruptError("checkpoint bytes are not JSON") from None
    if not isinstance(body, dict):
        raise CheckpointCorruptError("checkpoint is not a JSON object")
    key_id, mac = body.get("key_id"), body.get("mac")
    if not isinstance(key_id, str) or not isinstance(mac, str):
        raise CheckpointCorruptError("checkpoint has no key id or MAC", run_id=body.get("run_id"))
    unsigned = {k: v for k, v in body.items() if k != "mac"}
    try:
        signed = _signed_bytes(unsigned)
    except CanonicalizationError:
        raise CheckpointCorruptError("checkpoint body is not canonical JSON") from None
    keyring.verify(signed, Signature(key_id=key_id, mac=mac))

    version = body.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CheckpointMigrationError("checkpoint has no integer schema_version", run_id=body.get("run_id"))
    if version != SCHEMA_VERSION:
        body = migrate_envelope(body)
    try:
        envelope = CheckpointEnvelope.model_validate_json(canonical_json(body))
    except ValidationError as exc:
        raise _schema_error(exc, run_id=body.get("run_id"), generation=body.get("generation")) from None
    _check_envelope_matches_payload(envelope)
    check_invariants(envelope.payload)
    return envelope


def _check_envelope_matches_payload(envelope: CheckpointEnvelope) -> None:
    p = envelope.payload
    pairs = (
        ("run_id", envelope.run_id, p.identity.run_id),
        ("tenant_id", envelope.tenant_id, p.identity.tenant_id),
        ("task_id", envelope.task_id, p.identity.task_id),
        ("environment_instance_id", envelope.environment_instance_id, p.environment.instance_id),
    )
    for name, outer, inner in pairs:
        if outer != inner:
            raise CheckpointInvariantError(
                f"envelope {name} differs from the payload's", run_id=envelope.run_id
            )
