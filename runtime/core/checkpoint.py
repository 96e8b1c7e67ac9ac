"""Typed, versioned checkpoint schema (DESIGN.md section 3) and its signed envelope (section 4).

A checkpoint is a :class:`RunState` inside a :class:`CheckpointEnvelope`. Every model forbids
unknown fields and uses strict types, so a checkpoint written by a different version of the code,
or edited by hand, fails loudly instead of being half-understood. Large observations never live
here: they are content-addressed attachments referenced by ``sha256:`` digest.

Serialisation is always ``model_dump(mode="json")`` -> RFC 8785 canonical JSON; never pickle
(the first failure named in the sources).

Stored checkpoints are also *complete*: every field of every model must be present in the bytes,
defaults notwithstanding. A checkpoint that lost its receipts, permissions or preconditions must be
rejected, not read as "none" (DESIGN.md section 7, "checkpoint holds only model messages").
``seal`` always writes every field, and each migrator must produce every field of its target.

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
    CheckpointError,
    CheckpointInvariantError,
    CheckpointMigrationError,
    CheckpointSchemaError,
    WrongTrustRootError,
)

SCHEMA_VERSION = 2
"""The schema version this code writes; older ones are migrated by ``runtime.core.migrators``."""

Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Ident = Annotated[str, StringConstraints(min_length=1, max_length=200)]
NonNegInt = Annotated[int, Field(ge=0)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]


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
    ADAPTER_REFUSED = "adapter_refused"


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
    """Budget ceilings.

    Units: counts, seconds of wall time, cost in micro-units (1e-6 of a currency unit).
    """

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

    ``version`` is the adapter's own revision (a git HEAD, a journal sequence);
    ``state_fingerprint`` is a digest of the content; ``instance_id`` names the concrete
    environment instance.
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


class DecisionKind(StrEnum):
    """What a reviewer may decide about a frozen run (DESIGN.md section 6)."""

    REPLAN = "replan"
    ABORT = "abort"


class SignedDecision(Strict):
    """A reviewer's decision, signed under the reviewer trust root over every field but ``mac``.

    Bound to task, run, policy, the pending action (its intent digest), the idempotency key, both
    intent digests, the full receipt fingerprint, the environment instance/version/fingerprint and a
    one-time nonce (DESIGN.md section 6). Fields that do not apply to a case (no receipt, no
    pending write) are None and are bound as None.
    """

    case_id: Ident
    decision: DecisionKind
    reviewer: Ident
    task_id: Ident
    task_version: Ident
    run_id: Ident
    policy_id: Ident
    policy_version: Ident
    action_kind: Ident | None
    action_target: Annotated[str, StringConstraints(max_length=4096)] | None
    idempotency_key: Ident | None
    pending_intent_digest: Digest | None
    receipt_intent_digest: Digest | None
    receipt_fingerprint: Digest | None
    environment_instance_id: Ident
    environment_version: Ident
    environment_fingerprint: Digest
    nonce: Ident
    issued_at: AwareDatetime
    key_id: Ident
    mac: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class ReviewCaseRef(Strict):
    """An open or closed review case as the checkpoint sees it (full evidence lives in the case).

    ``idempotency_key`` and ``intent_digest`` name the write the case is about; they are None
    only for cases about no write at all (say, the environment drifted while running). Cases
    about a receipt must name the write (see :func:`check_invariants`).
    """

    case_id: Ident
    reason: StopReason
    status: ReviewCaseStatus = ReviewCaseStatus.OPEN
    idempotency_key: Ident | None
    intent_digest: Digest | None
    receipt: Receipt | None = None
    receipt_fingerprint: Digest | None = None
    environment_version: Ident
    opened_at: AwareDatetime
    decision: SignedDecision | None = None
    """The applied decision (set when the case is closed by replan or abort)."""


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
    # include_input=False: the offending value could be anything a writer put there; the field
    # path and the rule broken are enough for an operator and never leak data.
    # Unknown fields first: "this is not a checkpoint at all" is the most telling finding.
    errors = sorted(
        exc.errors(include_url=False, include_input=False),
        key=lambda e: e["type"] != "extra_forbidden",
    )
    where = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors[:6])
    more = f" (and {len(errors) - 6} more)" if len(errors) > 6 else ""
    return CheckpointSchemaError(
        f"checkpoint does not match schema v{SCHEMA_VERSION}: {where}{more}", **context
    )


def _non_json_path(value: Any, path: str) -> str | None:
    """Where in a ``model_dump(mode="python")`` tree a value is not a JSON type, or None.

    Datetimes and enum members are allowed (typed fields dump to them); anything else that is
    not a JSON type got in by mutating a list or dict in place, which validation on assignment
    cannot see. ``model_dump(mode="json")`` would quietly turn a set into a list or bytes into a
    string, so the check runs on the Python dump.
    """
    if value is None or isinstance(value, bool | int | float | str | datetime):
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path}.<{type(key).__name__} key>"
            found = _non_json_path(item, f"{path}.{key}" if path else key)
            if found:
                return found
        return None
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _non_json_path(item, f"{path}[{index}]")
            if found:
                return found
        return None
    return f"{path} ({type(value).__name__})"


def _require_complete(model: BaseModel, path: str, **context: Any) -> None:
    """Every field of every nested model must have been present in the parsed bytes.

    Pydantic fills defaults silently; for a stored checkpoint a missing ``executed`` list would
    read as "no receipts" and a missing ``permissions`` as "none", so absence is an error.
    """
    fields = type(model).model_fields
    missing = [name for name in fields if name not in model.model_fields_set]
    if missing:
        where = ", ".join(f"{path}.{name}" if path else name for name in missing)
        raise CheckpointSchemaError(f"checkpoint is missing field(s): {where}", **context)
    for name in fields:
        value = getattr(model, name)
        here = f"{path}.{name}" if path else name
        if isinstance(value, BaseModel):
            _require_complete(value, here, **context)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, BaseModel):
                    _require_complete(item, f"{here}[{index}]", **context)


def validate_state(state: RunState) -> RunState:
    """Check that ``state`` can be checkpointed and return a fresh, independent copy of it.

    Steps: every value is a JSON type (lists and dicts mutated in place are not validated on
    assignment, so they are walked); the state re-validates strictly; it encodes as RFC 8785
    canonical JSON; the canonical bytes parse back into a complete ``RunState``; and the
    cross-object invariants hold. This runs *before* anything is signed and before any
    generation is advanced (DESIGN.md section 4: an invalid state must never invalidate the last
    good one).

    Args:
        state: the in-memory run state.

    Raises:
        CanonicalizationError: a value is not JSON (set, bytes, tuple, Decimal, object), is NaN
            or infinite, or is an integer too large for canonical JSON.
        CheckpointSchemaError: a field has the wrong type or an unknown field is present.
        CheckpointInvariantError: cross-object invariants fail (see :func:`check_invariants`).
    """
    if not isinstance(state, RunState):
        raise CheckpointSchemaError(f"expected a RunState, got {type(state).__name__}")
    identity = getattr(state, "identity", None)
    run_id = getattr(identity, "run_id", None)
    try:
        python_dump = state.model_dump(mode="python", warnings=False)
        json_dump = state.model_dump(mode="json", warnings=False)
    except (TypeError, ValueError) as exc:  # pydantic serialisation errors are ValueErrors
        raise CanonicalizationError(f"state is not serialisable: {exc}", run_id=run_id) from None
    bad = _non_json_path(python_dump, "")
    if bad is not None:
        raise CanonicalizationError(f"state holds a value that is not JSON at {bad}", run_id=run_id)
    try:
        RunState.model_validate(python_dump, strict=True)
    except ValidationError as exc:
        raise _schema_error(exc, run_id=run_id) from None
    try:
        raw = canonical_json(json_dump)
    except CanonicalizationError as exc:
        raise CanonicalizationError(exc.message, run_id=run_id) from None
    try:
        copy = RunState.model_validate_json(raw)
    except ValidationError as exc:
        raise _schema_error(exc, run_id=run_id) from None
    _require_complete(copy, "", run_id=run_id)
    check_invariants(copy)
    return copy


def _fail(message: str, state: RunState) -> None:
    raise CheckpointInvariantError(message, run_id=state.identity.run_id)


_WRITE_CASE_REASONS = frozenset({
    StopReason.RECEIPT_CONFLICT,
    StopReason.RECEIPT_DRIFT,
    StopReason.RECEIPT_MISSING,
    StopReason.OUTCOME_UNKNOWN,
})
"""Review-case reasons that are about one write, so the case must name its key and intent."""

_PHASES_WITH_OPEN_CASES = frozenset({Phase.NEEDS_REVIEW, Phase.FAILED, Phase.CANCELLED})


def check_invariants(state: RunState) -> None:
    """Cross-object invariants of a run state. Explicit checks, never ``assert`` (they must hold
    under ``python -O`` too; DESIGN.md section 7).

    Phase: pending/awaiting_approval have a pending action and running has none; needs_review
    has an open review case and open cases exist only in needs_review, failed or cancelled;
    terminal phases have a stop reason; completed has no pending write and its last verifier
    result passed at the current environment version *and* fingerprint (section 6).

    Writes: executed idempotency keys are unique, each receipt carries its write's key and
    intent and matches its fingerprint; the pending action's digest matches the action, its key
    is neither quarantined nor already executed, its pre-state is on the run's environment
    instance, its replan epoch is not in the future, and its approvals (current and sealed) are
    bound to this run, key and intent, the current one also to the pre-state's instance, and
    expire after they are issued (sections 3 and 6).

    Review: case ids are unique; a case about a write names its key and intent; a receipt
    conflict keeps the full receipt and its fingerprint, and while it is open the pending
    action it is about is kept (section 7, "deleting the pending intent on a conflict").

    Budgets: usage of proposals, steps and cost stays within the limits unless the run ended
    with ``budget_exhausted``. Wall time is not checked here: it keeps passing while a human
    decides, and the engine enforces it when it next acts.

    Also: consumed nonces are unique, and the scope's policy version is the run's.

    Raises:
        CheckpointInvariantError: naming the first broken invariant and the run id.
    """
    _check_phase(state)
    executed_keys = _check_executed(state)
    _check_pending(state, executed_keys)
    _check_review_cases(state)

    for name in ("proposals", "steps", "cost_micros"):
        if getattr(state.usage, name) > getattr(state.limits, name) and not (
            state.phase in TERMINAL_PHASES and state.stop_reason == StopReason.BUDGET_EXHAUSTED
        ):
            _fail(f"budget usage {name} exceeds its limit", state)
    if len(state.consumed_nonces) != len(set(state.consumed_nonces)):
        _fail("a consumed nonce appears twice", state)
    if state.scope.policy_version != state.identity.policy_version:
        _fail("scope policy version differs from the run's policy version", state)


def _check_phase(state: RunState) -> None:
    if state.phase in (Phase.PENDING, Phase.AWAITING_APPROVAL) and state.pending is None:
        _fail(f"phase {state.phase} needs a pending action", state)
    if state.phase == Phase.RUNNING and state.pending is not None:
        _fail("a running run has no pending action; pending writes put it in phase pending", state)
    open_cases = [c for c in state.review_cases if c.status == ReviewCaseStatus.OPEN]
    if state.phase == Phase.NEEDS_REVIEW and not open_cases:
        _fail("phase needs_review requires an open review case", state)
    if open_cases and state.phase not in _PHASES_WITH_OPEN_CASES:
        _fail(f"phase {state.phase} cannot have an open review case; the run stays frozen", state)
    if state.phase in TERMINAL_PHASES and state.stop_reason is None:
        _fail(f"terminal phase {state.phase} needs a stop_reason", state)
    if state.phase == Phase.COMPLETED:
        if state.pending is not None:
            _fail("a completed run cannot have a pending write", state)
        last = state.verifier_results[-1] if state.verifier_results else None
        if (
            last is None
            or not last.passed
            or last.environment_version != state.environment.version
            or last.environment_fingerprint != state.environment.state_fingerprint
        ):
            _fail(
                "completion needs a passing verifier result at the final environment version "
                "and fingerprint",
                state,
            )


def _check_executed(state: RunState) -> set[str]:
    keys = [w.idempotency_key for w in state.executed]
    if len(keys) != len(set(keys)):
        _fail("an idempotency key appears twice among executed writes", state)
    for write in state.executed:
        if write.receipt.idempotency_key != write.idempotency_key:
            _fail(f"receipt of {write.idempotency_key} carries another key", state)
        if write.receipt.intent_digest != write.intent_digest:
            _fail(f"receipt of {write.idempotency_key} is for another intent", state)
        if write.receipt.fingerprint() != write.receipt_fingerprint:
            _fail(f"receipt fingerprint of {write.idempotency_key} does not match it", state)
    return set(keys)


def _check_pending(state: RunState, executed_keys: set[str]) -> None:
    pending = state.pending
    if pending is None:
        return
    if pending.intent_digest != pending.action.intent_digest():
        _fail("pending intent digest does not match the pending action", state)
    if pending.idempotency_key in state.quarantined_keys:
        _fail("pending action uses a quarantined idempotency key", state)
    if pending.idempotency_key in executed_keys:
        _fail("pending action reuses the key of an executed write", state)
    if pending.pre_state.instance_id != state.environment.instance_id:
        _fail("pending pre-state is bound to another environment instance", state)
    if pending.replan_epoch > state.replan_epoch:
        _fail("pending action comes from a replan epoch the run has not reached", state)
    for approval in [*pending.sealed_approvals, pending.approval]:
        if approval is None:
            continue
        if (
            approval.idempotency_key != pending.idempotency_key
            or approval.intent_digest != pending.intent_digest
            or approval.run_id != state.identity.run_id
        ):
            _fail(f"approval {approval.approval_id} is bound to another action", state)
        if approval.expires_at <= approval.issued_at:
            _fail(f"approval {approval.approval_id} expires before it is issued", state)
    if (
        pending.approval is not None
        and pending.approval.environment_instance_id != pending.pre_state.instance_id
    ):
        _fail("approval evidence is bound to another environment instance", state)


def _check_review_cases(state: RunState) -> None:
    case_ids = [c.case_id for c in state.review_cases]
    if len(case_ids) != len(set(case_ids)):
        _fail("a review case id appears twice", state)
    pending = state.pending
    for case in state.review_cases:
        if case.receipt is not None and case.receipt_fingerprint != case.receipt.fingerprint():
            _fail(f"review case {case.case_id}: receipt fingerprint does not match it", state)
        if case.reason in _WRITE_CASE_REASONS and (
            case.idempotency_key is None or case.intent_digest is None
        ):
            _fail(f"review case {case.case_id} about a write must name its key and intent", state)
        if case.reason == StopReason.RECEIPT_CONFLICT:
            if case.receipt is None or case.receipt_fingerprint is None:
                _fail(f"receipt conflict case {case.case_id} must keep the full receipt", state)
            if (
                state.phase == Phase.NEEDS_REVIEW
                and case.status == ReviewCaseStatus.OPEN
                and (
                    pending is None
                    or pending.idempotency_key != case.idempotency_key
                    or pending.intent_digest != case.intent_digest
                )
            ):
                _fail(
                    f"open receipt conflict case {case.case_id} needs its pending action kept",
                    state,
                )


# --- sealing and opening --------------------------------------------------------------------


def _signed_bytes(envelope_without_mac: dict[str, Any]) -> bytes:
    return canonical_json(envelope_without_mac)


def _require_checkpoint_root(keyring: Keyring) -> None:
    if not isinstance(keyring, Keyring) or keyring.root != TrustRoot.CHECKPOINT:
        raise WrongTrustRootError(
            "checkpoints are signed and verified only with the checkpoint trust root",
            root=getattr(getattr(keyring, "root", None), "value", type(keyring).__name__),
        )


def seal(state: RunState, *, generation: int, keyring: Keyring, created_at: datetime | None = None
         ) -> tuple[bytes, CheckpointEnvelope]:
    """Validate ``state`` and return ``(envelope_bytes, envelope)`` signed for ``generation``.

    Every check runs before the MAC is computed, so nothing invalid is ever signed (DESIGN.md
    section 4). The bytes are RFC 8785 canonical JSON holding every field of the schema.

    Args:
        state: the run state to checkpoint.
        generation: the generation this checkpoint will have (HWM + 1), an int >= 1.
        keyring: the checkpoint trust root's keyring (signs with its current key).
        created_at: timezone-aware timestamp to record; defaults to now (UTC).

    Raises:
        WrongTrustRootError: the keyring is not the checkpoint trust root's (a ``ValueError``).
        CheckpointSchemaError: ``generation`` is not an int >= 1 or ``created_at`` is naive.
        CanonicalizationError, CheckpointSchemaError, CheckpointInvariantError: from
            :func:`validate_state`.
    """
    _require_checkpoint_root(keyring)
    run_id = getattr(getattr(state, "identity", None), "run_id", None)
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
        raise CheckpointSchemaError("generation must be an integer >= 1", run_id=run_id)
    stamp = datetime.now(UTC) if created_at is None else created_at
    if not isinstance(stamp, datetime) or stamp.utcoffset() is None:
        raise CheckpointSchemaError("created_at must be a timezone-aware datetime", run_id=run_id)
    clean = validate_state(state)
    body: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run_id": clean.identity.run_id,
        "tenant_id": clean.identity.tenant_id,
        "task_id": clean.identity.task_id,
        "environment_instance_id": clean.environment.instance_id,
        "generation": generation,
        "created_at": stamp.isoformat(),
        "key_id": keyring.current_key_id,
        "payload": clean.model_dump(mode="json"),
    }
    try:
        signed = _signed_bytes(body)
    except CanonicalizationError as exc:
        raise CanonicalizationError(exc.message, run_id=clean.identity.run_id, generation=generation
                                    ) from None
    signature = keyring.sign(signed)
    body["mac"] = signature.mac
    raw = canonical_json(body)
    envelope = _envelope_from_body(body, context={"generation": generation})
    return raw, envelope


def envelope_digest(raw: bytes) -> str:
    """Untagged digest of stored envelope bytes.

    The HWM records it so that restore loads exactly these bytes; on its own it proves nothing
    about authenticity (DESIGN.md section 4).
    """
    return digest_bytes(raw)


class _DuplicateKeyError(ValueError):
    pass


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of two equal keys; a reader that kept the first would see other
    # data under the same MAC, so repeated keys are corruption.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


def _envelope_from_body(body: dict[str, Any], *, context: dict[str, Any]) -> CheckpointEnvelope:
    run_id = body.get("run_id") if isinstance(body.get("run_id"), str) else None
    try:
        envelope = CheckpointEnvelope.model_validate_json(canonical_json(body))
    except ValidationError as exc:
        raise _schema_error(exc, run_id=run_id, **context) from None
    _require_complete(envelope, "", run_id=run_id, **context)
    _check_envelope_matches_payload(envelope)
    check_invariants(envelope.payload)
    return envelope


def open_envelope(raw: bytes, *, keyring: Keyring) -> CheckpointEnvelope:
    """Parse, authenticate, migrate and validate stored envelope bytes.

    Order matters: the MAC is checked over the envelope as written (any schema version) before
    any migration runs, so a forged old-version checkpoint is never migrated into a trusted one
    (DESIGN.md sections 3-4). Nothing here changes ``raw``: a checkpoint that fails to open is
    still there for manual handling.

    Args:
        raw: the stored envelope bytes (``bytes``, ``bytearray`` or ``memoryview``).
        keyring: the checkpoint trust root's keyring; any key it still trusts verifies.

    Raises:
        WrongTrustRootError: ``keyring`` is not the checkpoint trust root's.
        CheckpointCorruptError: not JSON, a repeated key, not canonical-JSON values, or not an
            object with a key id and MAC.
        UnknownKeyError / BadSignatureError: the MAC does not verify under ``keyring``.
        CheckpointMigrationError: the schema version is unknown, has no migrator, or the
            migrated checkpoint is not valid at the current version.
        CheckpointSchemaError / CheckpointInvariantError: the (current-version) payload is invalid.
    """
    from runtime.core.migrators import migrate_envelope  # local: migrators import this module

    _require_checkpoint_root(keyring)
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise CheckpointCorruptError(f"checkpoint must be bytes, got {type(raw).__name__}")
    try:
        body = json.loads(bytes(raw), object_pairs_hook=_reject_duplicate_keys)
    except _DuplicateKeyError:
        raise CheckpointCorruptError("checkpoint JSON repeats a key") from None
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise CheckpointCorruptError("checkpoint bytes are not JSON") from None
    if not isinstance(body, dict):
        raise CheckpointCorruptError("checkpoint is not a JSON object")
    run_id = body.get("run_id") if isinstance(body.get("run_id"), str) else None
    generation = body.get("generation") if type(body.get("generation")) is int else None
    key_id, mac = body.get("key_id"), body.get("mac")
    if not isinstance(key_id, str) or not isinstance(mac, str):
        raise CheckpointCorruptError("checkpoint has no key id or MAC", run_id=run_id)
    unsigned = {k: v for k, v in body.items() if k != "mac"}
    try:
        signed = _signed_bytes(unsigned)
    except CanonicalizationError:
        raise CheckpointCorruptError(
            "checkpoint body is not canonical JSON", run_id=run_id
        ) from None
    keyring.verify(signed, Signature(key_id=key_id, mac=mac))

    version = body.get("schema_version")
    if type(version) is not int:
        raise CheckpointMigrationError(
            "checkpoint has no integer schema_version", run_id=run_id, generation=generation
        )
    if version == SCHEMA_VERSION:
        return _envelope_from_body(body, context={"generation": generation})
    migrated = migrate_envelope(body)
    try:
        return _envelope_from_body(migrated, context={"generation": generation})
    except (CheckpointError, CanonicalizationError) as exc:
        raise CheckpointMigrationError(
            f"checkpoint migrated from schema v{version} is not a valid v{SCHEMA_VERSION} "
            f"checkpoint: {exc.message}",
            run_id=run_id,
            generation=generation,
            schema_version=version,
        ) from None


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
                f"envelope {name} differs from the payload's",
                run_id=envelope.run_id,
                generation=envelope.generation,
            )
