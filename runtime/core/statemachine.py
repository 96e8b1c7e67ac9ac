"""The run state machine of DESIGN.md section 6, as data.

A run's :class:`~runtime.core.checkpoint.Phase` changes only through :func:`transition`, which
looks the ``(phase, event)`` pair up in :data:`TRANSITIONS` and raises
:class:`~runtime.errors.IllegalTransitionError` for anything the table does not list. Terminal
phases (completed, failed, cancelled) accept no event at all: a finished run is never revived.

The table, beyond the rows drawn in DESIGN.md section 6::

    running           --propose_write-->     pending           pending intent saved
    running           --approval_required--> awaiting_approval intent saved; a human must approve
    pending           --approval_required--> awaiting_approval approval missing or not usable
    pending           --approval_expired-->  awaiting_approval expiry is not corruption: freeze
    awaiting_approval --approved-->          pending           fresh approval bound to the action
    awaiting_approval --deny-->              failed            a human refused the write
    awaiting_approval --deny_continue-->     running           refused with feedback: plan the next write
    pending           --executed-->          running           no receipt: executed once
    pending           --reconciled-->        running           same key and intent: receipt reused
    awaiting_approval --reconciled-->        running           a receipt proves it committed
    pending           --receipt_conflict-->  needs_review      same key, different intent
    needs_review      --review_replan-->     running           signed replan: old key quarantined
    needs_review      --review_abort-->      failed            signed abort: evidence kept
    needs_review      --review_refused-->    needs_review      unknown signer, tampering, binding
    running           --verified-->          completed         verifier passed at final version

Drift (receipt, environment) and an unknown outcome freeze a live run in needs_review; budget
exhaustion, a policy violation or a failing verifier end a *running* run (no write in flight) as
failed. Budget exhaustion is deliberately not accepted while a write is pending or awaiting
approval: the write may already have happened, so it must be reconciled first. ``cancel`` is
accepted in every live phase; a pending write's evidence stays in the checkpoint.

This module is framework-free (no Django).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from runtime.core.checkpoint import TERMINAL_PHASES, Phase
from runtime.errors import IllegalTransitionError


class Event(StrEnum):
    """Everything that can move a run between phases (DESIGN.md sections 5-6)."""

    PROPOSE_WRITE = "propose_write"
    """A write passed the contract gate and its intent was checkpointed."""
    APPROVAL_REQUIRED = "approval_required"
    """The write needs a human approval that is not (or no longer) there."""
    APPROVED = "approved"
    """A fresh, signed approval bound to exactly this action and environment arrived."""
    APPROVAL_EXPIRED = "approval_expired"
    """The approval expired before the write ran; the pending action stays frozen."""
    DENY = "deny"
    """A human refused the pending write."""
    DENY_CONTINUE = "deny_continue"
    """A human refused the pending write and let the run plan another (DESIGN.md section 6.14)."""
    EXECUTED = "executed"
    """The adapter executed the write once with its original key and returned a receipt."""
    RECONCILED = "reconciled"
    """The adapter already held a receipt for the same key and intent; it is reused."""
    RECEIPT_CONFLICT = "receipt_conflict"
    """The adapter holds a receipt for the same key but a different intent."""
    RECEIPT_DRIFT = "receipt_drift"
    """Cache and adapter disagree, or the adapter's receipt is missing: never claim a replay."""
    ENVIRONMENT_DRIFT = "environment_drift"
    """The environment is not the checkpointed state nor the single pending write's post-state."""
    OUTCOME_UNKNOWN = "outcome_unknown"
    """The write timed out repeatedly and no receipt explains what happened."""
    REVIEW_REPLAN = "review_replan"
    """A trusted reviewer signed ``replan`` and it was applied."""
    REVIEW_ABORT = "review_abort"
    """A trusted reviewer signed ``abort`` and it was applied."""
    REVIEW_REFUSED = "review_refused"
    """A decision was refused (unknown signer, tampering, wrong binding, changed environment)."""
    VERIFIED = "verified"
    """The verifier passed at the current environment version."""
    VERIFIER_FAILED = "verifier_failed"
    """The verifier failed."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """A proposal, step, wall-time or cost budget ran out."""
    POLICY_VIOLATION = "policy_violation"
    """A proposed write broke the run's scope or policy."""
    CANCEL = "cancel"
    """An operator cancelled the run."""
    ADAPTER_REFUSED = "adapter_refused"
    """The adapter refused a write or observation for a reason a retry cannot fix."""
    PLANNER_FAILED = "planner_failed"
    """The planner raised, or returned a state too large or not JSON; nothing was proposed."""


_FREEZE = {
    Event.RECEIPT_DRIFT: Phase.NEEDS_REVIEW,
    Event.ENVIRONMENT_DRIFT: Phase.NEEDS_REVIEW,
    Event.ADAPTER_REFUSED: Phase.NEEDS_REVIEW,
}

_TABLE: dict[Phase, dict[Event, Phase]] = {
    Phase.RUNNING: {
        Event.PROPOSE_WRITE: Phase.PENDING,
        Event.APPROVAL_REQUIRED: Phase.AWAITING_APPROVAL,
        Event.ENVIRONMENT_DRIFT: Phase.NEEDS_REVIEW,
        Event.ADAPTER_REFUSED: Phase.NEEDS_REVIEW,
        Event.PLANNER_FAILED: Phase.NEEDS_REVIEW,
        Event.VERIFIED: Phase.COMPLETED,
        Event.VERIFIER_FAILED: Phase.FAILED,
        Event.BUDGET_EXHAUSTED: Phase.FAILED,
        Event.POLICY_VIOLATION: Phase.FAILED,
        Event.CANCEL: Phase.CANCELLED,
    },
    Phase.PENDING: {
        Event.APPROVAL_REQUIRED: Phase.AWAITING_APPROVAL,
        Event.APPROVAL_EXPIRED: Phase.AWAITING_APPROVAL,
        Event.EXECUTED: Phase.RUNNING,
        Event.RECONCILED: Phase.RUNNING,
        Event.RECEIPT_CONFLICT: Phase.NEEDS_REVIEW,
        Event.OUTCOME_UNKNOWN: Phase.NEEDS_REVIEW,
        **_FREEZE,
        Event.CANCEL: Phase.CANCELLED,
    },
    Phase.AWAITING_APPROVAL: {
        Event.APPROVED: Phase.PENDING,
        Event.APPROVAL_EXPIRED: Phase.AWAITING_APPROVAL,
        Event.DENY: Phase.FAILED,
        Event.DENY_CONTINUE: Phase.RUNNING,
        Event.RECONCILED: Phase.RUNNING,
        Event.RECEIPT_CONFLICT: Phase.NEEDS_REVIEW,
        **_FREEZE,
        Event.CANCEL: Phase.CANCELLED,
    },
    Phase.NEEDS_REVIEW: {
        Event.REVIEW_REPLAN: Phase.RUNNING,
        Event.REVIEW_ABORT: Phase.FAILED,
        Event.REVIEW_REFUSED: Phase.NEEDS_REVIEW,
        # Re-reading the receipt or environment before applying a decision found drift: the
        # run stays frozen (DESIGN.md section 6).
        **_FREEZE,
        Event.CANCEL: Phase.CANCELLED,
    },
    **{phase: {} for phase in TERMINAL_PHASES},
}

TRANSITIONS: Mapping[Phase, Mapping[Event, Phase]] = MappingProxyType(
    {phase: MappingProxyType(_TABLE[phase]) for phase in Phase}
)
"""``phase -> {event -> next phase}`` for every phase; read-only. Terminal phases map to ``{}``."""


def _as_phase(phase: Phase | str) -> Phase | None:
    try:
        return Phase(phase)
    except ValueError:
        return None


def _as_event(event: Event | str) -> Event | None:
    try:
        return Event(event)
    except ValueError:
        return None


def transition(phase: Phase, event: Event, *, run_id: str | None = None) -> Phase:
    """The phase a run moves to when ``event`` happens in ``phase`` (DESIGN.md section 6).

    Args:
        phase: the run's current phase (a ``Phase`` or its value).
        event: what happened (an ``Event`` or its value).
        run_id: optional, only to name the run in the error.

    Returns:
        The next ``Phase``.

    Raises:
        IllegalTransitionError: the table has no such transition, the phase is terminal, or
            ``phase``/``event`` is not a known value. Context: ``phase``, ``event``, ``run_id``.
    """
    known_phase, known_event = _as_phase(phase), _as_event(event)
    if known_phase is None or known_event is None:
        raise IllegalTransitionError(
            "unknown phase or event", phase=str(phase)[:40], event=str(event)[:40], run_id=run_id
        )
    nxt = TRANSITIONS[known_phase].get(known_event)
    if nxt is None:
        message = (
            f"phase {known_phase} is terminal and accepts no event"
            if known_phase in TERMINAL_PHASES
            else f"event {known_event} is not allowed in phase {known_phase}"
        )
        raise IllegalTransitionError(
            message, phase=known_phase.value, event=known_event.value, run_id=run_id
        )
    return nxt


def allowed_events(phase: Phase) -> frozenset[Event]:
    """The events ``phase`` accepts; empty for terminal phases.

    Raises:
        IllegalTransitionError: ``phase`` is not a known phase value.
    """
    known = _as_phase(phase)
    if known is None:
        raise IllegalTransitionError("unknown phase", phase=str(phase)[:40])
    return frozenset(TRANSITIONS[known])
