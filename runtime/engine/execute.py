"""Executing the pending write exactly once, or reconciling the receipt the adapter already holds.

The middle rows of the crash-window table (DESIGN.md section 5): the adapter's authoritative
store is always queried by idempotency key first, so a success a crash hid is reconciled and
never executed again; only when it holds nothing, the approval (if one is needed) still
authorises the write (DESIGN.md section 6) and the environment is still the pending write's
pre-state does the write run, under a re-checked lease with the lease's fencing token. An
approved write carries its approval's deadline into the adapter (``not_after``, DESIGN.md
sections 4.7 and 5.5); an adapter that refuses to commit past it leaves the run waiting for a
fresh approval, exactly as an approval that expired before the call. A timeout leaves the
outcome unknown: the next step queries again, and after :data:`MAX_UNKNOWN_OUTCOME_ATTEMPTS`
timeouts a human decides.
"""

from __future__ import annotations

from runtime.adapters.deadline import CommitDeadline, adapter_takes_deadline, deadline_measure
from runtime.checkpoints.approval_checks import approval_problem
from runtime.checkpoints.receipts import receipt_cache_get
from runtime.checkpoints.session import (
    RunSession,
    observation_json,
    observation_matches,
    session_blob,
    session_commit,
    session_heartbeat,
    session_lease_check,
)
from runtime.core.checkpoint import PendingAction, StopReason
from runtime.core.crashpoints import crash_point, register
from runtime.core.evidence import approval_digest
from runtime.core.statemachine import Event, transition
from runtime.database.clock import db_now
from runtime.engine.freeze import run_freeze, run_freeze_fenced
from runtime.engine.settle import receipt_settle
from runtime.errors import AdapterTimeoutError, CommitDeadlinePassedError, EngineError, FencingTokenError

CP_BEFORE_EXECUTE = register("engine.before_execute", "lease re-checked, about to call adapter.execute")
CP_AFTER_EXECUTE = register("engine.after_execute", "adapter returned a receipt, nothing persisted yet")

MAX_UNKNOWN_OUTCOME_ATTEMPTS = 3
"""Timeouts on one pending write before the run freezes for a human (outcome stays unknown)."""


def pending_execute(session: RunSession) -> None:
    """Execute the pending write once, or reconcile the receipt the adapter already holds.

    The look-up by key first raises the adapter's fence to this lease's token, and the write
    runs under a lease heartbeat (DESIGN.md sections 4.6 and 4.9). A fencing refusal is traced
    and freezes the run for review (:func:`run_freeze_fenced`).

    Raises:
        EngineError: the run is pending without a pending action (fail closed).
        LeaseLostError: the lease was lost before the adapter call, or during it.
        AdapterError: the adapter failed (the step decides: retry or freeze).
    """
    try:
        _pending_execute(session)
    except FencingTokenError as exc:
        run_freeze_fenced(session, exc)


def _pending_execute(session: RunSession) -> None:
    state = session.state
    pending = state.pending
    if pending is None:  # invariant says otherwise; fail closed rather than trust it
        raise EngineError("phase pending without a pending action", run_id=session.run_id)
    key = pending.idempotency_key
    # Always query the adapter's authoritative store first: a crash may have hidden a success.
    session_lease_check(session)
    receipt = session.adapter.lookup_receipt(key)
    if receipt is not None:
        receipt_settle(session, receipt, reconciled=True)
        return
    if pending.requires_approval:
        problem = approval_problem(pending=pending, state=state, observation=session.adapter.observe())
        if problem is not None:
            _approval_unusable(session, problem, expired=pending.approval is not None and problem == "expired")
            return
    cached = receipt_cache_get(idempotency_key=key)
    if cached is not None:
        run_freeze(session, Event.RECEIPT_DRIFT, StopReason.RECEIPT_MISSING,
                   "the runtime cache holds a receipt the adapter no longer has; refusing to claim a replay",
                   receipt=cached)
        return
    obs = session.adapter.observe()
    if obs.instance_id != pending.pre_state.instance_id or not observation_matches(obs, pending.pre_state):
        if obs.state_fingerprint == pending.expected_post_fingerprint:
            detail = "the pending write's effect is visible but the adapter has no receipt for its key"
            run_freeze(session, Event.RECEIPT_DRIFT, StopReason.RECEIPT_MISSING, detail,
                       extra={"observed": observation_json(obs)})
        else:
            run_freeze(session, Event.ENVIRONMENT_DRIFT, StopReason.ENVIRONMENT_DRIFT,
                       "environment differs from the pending write's pre-state",
                       extra={"observed": observation_json(obs)})
        return
    session_lease_check(session)
    deadline = _commit_deadline(session, pending)
    crash_point(CP_BEFORE_EXECUTE)
    try:
        with session_heartbeat(session):
            receipt = session.adapter.execute(
                pending.action,
                idempotency_key=key,
                intent_digest=pending.intent_digest,
                fencing_token=session.lease.lease_version,
                blobs=lambda digest: session_blob(session, digest),
                approval_digest=_approval_digest(pending),
                **deadline,
            )
    except AdapterTimeoutError as exc:
        _outcome_unknown(session, exc)
        return
    except CommitDeadlinePassedError as exc:
        _approval_unusable(session, f"expired before the write could commit ({exc.message})", expired=True,
                           late_by_seconds=exc.context.get("late_by_seconds"))
        return
    crash_point(CP_AFTER_EXECUTE)
    receipt_settle(session, receipt, reconciled=False, cache_empty=True)


def _commit_deadline(session: RunSession, pending: PendingAction) -> dict[str, CommitDeadline]:
    """``{"not_after": deadline}`` for an approved write whose adapter takes one, else ``{}``.

    Plug-ins written before deadlines are called as before; a write of theirs that commits
    after the approval expired is caught by its receipt's commit time (section 6.4).
    """
    if pending.approval is None or not adapter_takes_deadline(session.adapter):
        return {}
    return {"not_after": deadline_measure(not_after=pending.approval.expires_at, database_now=db_now)}


def _approval_unusable(session: RunSession, problem: str, *, expired: bool, **extra: object) -> None:
    """Stop for a (fresh) approval: nothing was written under the key."""
    state = session.state
    key = state.pending.idempotency_key if state.pending is not None else None
    state.phase = transition(state.phase, Event.APPROVAL_EXPIRED if expired else Event.APPROVAL_REQUIRED)
    state.stop_reason = StopReason.APPROVAL_EXPIRED if expired else StopReason.APPROVAL_REQUIRED
    state.stop_detail = f"approval not usable: {problem}"
    payload = {"idempotency_key": key, "problem": problem,
               **{name: value for name, value in extra.items() if value is not None}}
    session_commit(session, ("approval.expired" if expired else "approval.requested", payload))


def _approval_digest(pending: PendingAction) -> str | None:
    return approval_digest(pending.approval) if pending.approval is not None else None


def _outcome_unknown(session: RunSession, exc: Exception) -> None:
    """Timeout: the write may or may not have happened. Record it; the next step queries first."""
    pending = session.state.pending
    if pending is None:
        raise EngineError("timeout without a pending action", run_id=session.run_id)
    pending.attempts += 1
    payload = {"idempotency_key": pending.idempotency_key, "attempts": pending.attempts, "error": str(exc)[:500]}
    if pending.attempts >= MAX_UNKNOWN_OUTCOME_ATTEMPTS:
        receipt = session.adapter.lookup_receipt(pending.idempotency_key)
        if receipt is not None:
            receipt_settle(session, receipt, reconciled=True)
            return
        run_freeze(session, Event.OUTCOME_UNKNOWN, StopReason.OUTCOME_UNKNOWN,
                   f"write timed out {pending.attempts} times and no receipt exists for its key", extra=payload)
        return
    session_commit(session, ("write.outcome_unknown", payload))
