"""Whole-state validation of a checkpoint's run state (DESIGN.md sections 3 and 7).

The schema types (``runtime.core.checkpoint``) check one field at a time; this module checks
what they cannot: that a state is JSON all the way down, survives a canonical round trip, is
*complete* (every field present in the bytes), and that its parts agree with each other.

Public entry points:
    :func:`validate_state`    serialisability + schema round trip + completeness + invariants.
    :func:`check_invariants`  the cross-object invariants alone.
    :func:`require_complete`  every field of every nested model was present when parsed.
    :func:`schema_error`      a pydantic ``ValidationError`` as a typed, data-free error.

Never ``assert``: the checks must hold under ``python -O`` too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import (
    SCHEMA_VERSION,
    TERMINAL_PHASES,
    Phase,
    ReviewCaseStatus,
    RunState,
    StopReason,
)
from runtime.errors import CanonicalizationError, CheckpointInvariantError, CheckpointSchemaError


def schema_error(exc: ValidationError, **context: Any) -> CheckpointSchemaError:
    """A pydantic ``ValidationError`` as a :class:`CheckpointSchemaError` naming fields, not values.

    Args:
        exc: the validation error from parsing a ``RunState`` or an envelope.
        context: identifiers for the error (``run_id``, ``generation``...).
    """
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


def require_complete(model: BaseModel, path: str, **context: Any) -> None:
    """Every field of every nested model must have been present in the parsed bytes.

    Pydantic fills defaults silently; for a stored checkpoint a missing ``executed`` list would
    read as "no receipts" and a missing ``permissions`` as "none", so absence is an error
    (DESIGN.md section 7, "checkpoint holds only model messages").

    Args:
        model: the parsed model (a ``RunState``, an envelope, or any nested part).
        path: dotted field path of ``model`` for the message (``""`` at the top).
        context: identifiers for the error (``run_id``, ``generation``...).

    Raises:
        CheckpointSchemaError: naming every missing field at the first level that misses one.
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
            require_complete(value, here, **context)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, BaseModel):
                    require_complete(item, f"{here}[{index}]", **context)


def validate_state(state: RunState) -> RunState:
    """As :func:`validate_state_encoded`, returning only the validated copy."""
    return validate_state_encoded(state)[0]


def validate_state_encoded(state: RunState) -> tuple[RunState, bytes]:
    """Check that ``state`` can be checkpointed; return a fresh, independent copy of it and its
    RFC 8785 canonical bytes (encoded once here and reused by ``seal``: DESIGN.md section 4).

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
        raise schema_error(exc, run_id=run_id) from None
    try:
        raw = canonical_json(json_dump)
    except CanonicalizationError as exc:
        raise CanonicalizationError(exc.message, run_id=run_id) from None
    try:
        copy = RunState.model_validate_json(raw)
    except ValidationError as exc:
        raise schema_error(exc, run_id=run_id) from None
    require_complete(copy, "", run_id=run_id)
    check_invariants(copy)
    return copy, raw


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

    Writes: the pending action's digest matches the action (that its key is neither quarantined
    nor already executed is a ledger lookup the commit makes, section 3.1), its pre-state is on
    the run's environment
    instance, its replan epoch is not in the future, and its approvals (current and sealed) are
    bound to this run, key and intent, the current one also to the pre-state's instance, and
    expire after they are issued (sections 3 and 6).

    Review: case ids are unique; a case about a write names its key and intent; a receipt
    conflict keeps the full receipt and its fingerprint, and while it is open the pending
    action it is about is kept (section 7, "deleting the pending intent on a conflict").

    Budgets: usage of proposals, steps and cost stays within the limits unless the run ended
    with ``budget_exhausted``. Wall time is not checked here: it keeps passing while a human
    decides, and the engine enforces it when it next acts.

    Also: the scope's policy version is the run's. (Unique executed keys and consumed nonces
    are the receipts ledger's to keep: ``runtime.core.ledger``.)

    Raises:
        CheckpointInvariantError: naming the first broken invariant and the run id.
    """
    _check_phase(state)
    _check_pending(state)
    _check_review_cases(state)

    for name in ("proposals", "steps", "cost_micros"):
        if getattr(state.usage, name) > getattr(state.limits, name) and not (
            state.phase in TERMINAL_PHASES and state.stop_reason == StopReason.BUDGET_EXHAUSTED
        ):
            _fail(f"budget usage {name} exceeds its limit", state)
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


def _check_pending(state: RunState) -> None:
    # Whether the pending key was executed or quarantined is a ledger lookup, checked by the
    # commit (``runtime.checkpoints.protocol``) and by the ledger itself (DESIGN.md section 3.1).
    pending = state.pending
    if pending is None:
        return
    if pending.intent_digest != pending.action.intent_digest():
        _fail("pending intent digest does not match the pending action", state)
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
