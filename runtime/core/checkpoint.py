"""Typed, versioned checkpoint schema (DESIGN.md section 3).

A checkpoint is a :class:`RunState` inside a signed envelope (``runtime.core.envelope``). Every
model forbids unknown fields and uses strict types, so a checkpoint written by a different version
of the code, or edited by hand, fails loudly instead of being half-understood. Large observations
never live here: they are content-addressed attachments referenced by ``sha256:`` digest.

Serialisation is always ``model_dump(mode="json")`` -> RFC 8785 canonical JSON; never pickle
(the first failure named in the sources).

Over 400 lines: it is the one schema of a checkpoint; every model a checkpoint holds is here, so
a schema version is one file to read and to migrate from.

Stored checkpoints are also *complete*: every field of every model must be present in the bytes,
defaults notwithstanding. A checkpoint that lost its receipts, permissions or preconditions must be
rejected, not read as "none" (DESIGN.md section 7, "checkpoint holds only model messages").

Related modules:
    ``runtime.core.invariants``  ``validate_state`` and ``check_invariants`` over these types.
    ``runtime.core.envelope``    ``seal`` / ``open_envelope``: the signed envelope (section 4).
    ``runtime.core.migrators``   older schema versions to :data:`SCHEMA_VERSION`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    StringConstraints,
    model_serializer,
    model_validator,
)

from runtime.core.canonical import DigestKind, digest

SCHEMA_VERSION = 3
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
    LEDGER_CORRUPT = "ledger_corrupt"  # the ledger does not chain to the signed head (section 3.1)
    PLANNER_FAILED = "planner_failed"
    VERIFIER_ERROR = "verifier_error"  # the verifier gave no verdict (section 6.5)
    RESTORE_REFUSED = "restore_refused"  # a restore failed closed; row-only freeze (section 4.15)
    CODE_CHANGED = "code_changed"  # a resume under other code than pinned; a case only (section 8.4)


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
    mac: Annotated[str, StringConstraints(pattern=r"^(?:[0-9a-f]{64}|[0-9a-f]{128})$")]
    comment: Annotated[str, StringConstraints(max_length=2000)] | None = None
    """The approver's optional comment, signed with the rest (DESIGN.md section 6.15). Left out of
    the bytes when None, so evidence signed before the field existed keeps its signature."""

    @model_validator(mode="after")
    def _absent_comment_is_complete(self) -> ApprovalEvidence:
        # An absent comment means "signed without one", not a lost default (see SignedDecision).
        self.__pydantic_fields_set__.add("comment")
        return self

    @model_serializer(mode="wrap")
    def _omit_absent_comment(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        if data.get("comment", "") is None:
            del data["comment"]
        return data


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


B64Url = Annotated[str, StringConstraints(min_length=1, max_length=16384, pattern=r"^[A-Za-z0-9_-]+$")]


class PasskeyAssertion(Strict):
    """A reviewer's WebAuthn assertion and the public key they registered, as evidence
    (DESIGN.md section 6.9). Byte fields are unpadded base64url; ``public_key`` is the COSE key.
    The assertion's challenge is ``runtime.core.passkey_evidence.decision_challenge`` of the
    decision that holds it; checked offline by ``passkey_evidence.passkey_problem``."""

    credential_id: B64Url
    public_key: B64Url
    authenticator_data: B64Url
    client_data_json: B64Url
    signature: B64Url
    rp_id: Annotated[str, StringConstraints(min_length=1, max_length=253)]
    origin: Annotated[str, StringConstraints(min_length=1, max_length=2048)]


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
    expires_at: AwareDatetime | None = None
    """Signed end of validity on the database clock (DESIGN.md section 6.3). Left out of the bytes
    when None, like ``passkey``: decisions signed before the field existed keep their signatures,
    still verify in checkpoints and bundles, and are refused if anyone tries to apply one now."""
    key_id: Ident
    mac: Annotated[str, StringConstraints(pattern=r"^(?:[0-9a-f]{64}|[0-9a-f]{128})$")]
    passkey: PasskeyAssertion | None = None
    """Optional: the reviewer's WebAuthn assertion over this decision's digest
    (``runtime.core.passkey_evidence``; DESIGN.md section 6.9). Left out of the bytes when None,
    so decisions signed before the field existed keep their signatures and still load."""

    @model_validator(mode="after")
    def _absent_passkey_is_complete(self) -> SignedDecision:
        # An absent passkey or expiry means "signed without one", not a lost default: the
        # Ed25519 signature covers the stored bytes, so stripping either breaks it.
        self.__pydantic_fields_set__.update(("passkey", "expires_at"))
        return self

    @model_serializer(mode="wrap")
    def _omit_absent_passkey(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        for name in ("passkey", "expires_at"):
            if data.get(name, "") is None:
                del data[name]
        return data


class ReviewCaseRef(Strict):
    """An open or closed review case as the checkpoint sees it (full evidence lives in the case).

    ``idempotency_key`` and ``intent_digest`` name the write the case is about; they are None
    only for cases about no write at all (say, the environment drifted while running). Cases
    about a receipt must name the write (see ``runtime.core.invariants.check_invariants``).
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


class LedgerHead(Strict):
    """What a checkpoint commits to of the run's receipts ledger (DESIGN.md section 3.1): its
    number of entries and the hash of the last one (None while the ledger is empty)."""

    length: NonNegInt = 0
    head: Digest | None = None

    @model_validator(mode="after")
    def _empty_iff_no_head(self) -> LedgerHead:
        if (self.length == 0) == (self.head is not None):
            raise ValueError("a ledger head is set exactly when the ledger has entries")
        return self


class RunState(Strict):
    """Everything needed to resume a run exactly (DESIGN.md section 3). Constant in size: executed
    writes, consumed nonces and quarantined keys are receipts-ledger entries ``ledger`` commits
    to (section 3.1), read through the attached ``runtime.core.ledger.LedgerView``."""

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
    ledger: LedgerHead = Field(default_factory=LedgerHead)
    scope: Scope
    verifier_results: list[VerifierResult] = Field(default_factory=list)
    review_cases: list[ReviewCaseRef] = Field(default_factory=list)
    planner_state: dict[str, JsonValue] = Field(default_factory=dict)
    started_at: AwareDatetime

    _ledger_view: Any = PrivateAttr(default=None)
    __hash__ = None  # type: ignore[assignment]  # mutable, like every pydantic model

    def __eq__(self, other: object) -> bool:
        # Equal when the checkpointed fields are: the ledger view is a reading aid, not state.
        return self.__dict__ == other.__dict__ if isinstance(other, RunState) else NotImplemented

    @property
    def ledger_view(self) -> Any:
        """The attached ``runtime.core.ledger.LedgerView`` (None until restore or first use)."""
        return self._ledger_view

    def attach_ledger(self, view: Any) -> None:
        """Attach the view ledger lookups and appends go through (``runtime.core.ledger``)."""
        self._ledger_view = view
