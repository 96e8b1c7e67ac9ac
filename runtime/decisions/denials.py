"""Denying the write a run waits on: stop the run, or let the agent try something else (DESIGN.md section 6.14).

Two modes (:class:`~runtime.core.denial_evidence.DenyMode`). **Stop** ends the run failed with the
reason, as a denial always did. **Continue** ("deny and let the agent try something else") drops
the write unexecuted, moves the plan cursor past it and puts the run back to running: the planner
gets the reason as the outcome of that write (``runtime.planners.base.ActionDenied``; the
chat-tools planner as the tool call's result) and a waiting gateway call is answered ``denied``
with it. Either way the denial is signed under the approval root, bound to the write (key, intent
digest, cursor, epoch) and the environment the approver saw, kept in the run's receipts ledger
(so the checkpoint commits to it and a bundle carries it) and traced (``approval.denied`` for
stop, ``approval.denied_with_feedback`` for continue, each with the signed denial).

A denial, like an approval, is refused (and the refusal traced) when the pending write is not the
one the approver looked at (``intent_digest``) or the environment changed since
(``environment_fingerprint``); both are optional for callers that did not show them. If the
adapter already holds a receipt for the write, it cannot be undone: it is reconciled and the
denial refused.
"""

from __future__ import annotations

import runtime.workers.dispatch
from runtime.checkpoints.session import session_commit
from runtime.core.checkpoint import StopReason
from runtime.core.denial_evidence import MAX_REASON_CHARS, DenyMode, denial_sign
from runtime.core.ledger import state_ledger
from runtime.core.signing import TrustRoot
from runtime.core.statemachine import Event, transition
from runtime.database.clock import db_now
from runtime.decisions.approvals import ApprovalOutcome, _refusal_trace, _waiting_session, observed_json, seen_problem
from runtime.engine.settle import receipt_settle
from runtime.errors import ApprovalRefusedError
from runtime.keys import signer_for


def approval_deny(*, run_id: str, approver: str, reason: str, mode: DenyMode | str = DenyMode.STOP,
                  environment_fingerprint: str | None = None,
                  intent_digest: str | None = None) -> ApprovalOutcome:
    """Deny the write ``run_id`` waits on, signed and traced (see the module docstring).

    Args:
        run_id: a run in ``awaiting_approval``.
        approver: who denies (signed into the denial).
        reason: why, non-blank; trimmed to 2,000 characters. In ``continue`` mode it is what the
            planner (a model) is told.
        mode: ``"stop"`` (the run fails) or ``"continue"`` (the run plans its next write).
        environment_fingerprint: the fingerprint the approver looked at; None: not compared.
        intent_digest: the intent digest the approver looked at; None: not compared.

    Returns:
        :class:`ApprovalOutcome` with outcome ``denied`` (phase ``failed``) or
        ``denied_with_feedback`` (phase ``running``; a worker is asked to continue).

    Raises:
        ApprovalRefusedError: a blank reason or unknown mode (nothing read), the run is not
            waiting, the write already happened (reconciled instead), or the action or
            environment is not what the approver looked at (traced as ``approval.refused``).
        KeyringError: this process holds no private approval key.
        LeaseHeldError: a worker or another session is changing the run; try again shortly.
    """
    text = reason.strip()[:MAX_REASON_CHARS]
    if not text:
        raise ApprovalRefusedError("a denial needs a reason", run_id=run_id)
    try:
        chosen = DenyMode(mode)
    except ValueError:
        raise ApprovalRefusedError(f"unknown denial mode {str(mode)[:20]!r} (stop or continue)",
                                   run_id=run_id) from None
    with _waiting_session(run_id=run_id, approver=approver, action="deny") as (ctx, pending, receipt):
        state = ctx.state
        if receipt is not None:
            receipt_settle(ctx, receipt, reconciled=True, fold=False)
            raise ApprovalRefusedError("the write already committed before a crash; it was reconciled, not denied",
                                       run_id=run_id)
        obs = ctx.adapter.observe()
        # A denial changes nothing in the environment, so only what the approver saw is compared.
        problem = seen_problem(pending=pending, obs=obs, seen=environment_fingerprint, seen_intent=intent_digest,
                               planned_against=False)
        if problem:
            _refusal_trace(run_id=run_id, approver=approver, action="deny", reason=problem,
                           seen_fingerprint=environment_fingerprint, seen_intent=intent_digest,
                           observed=observed_json(obs))
            raise ApprovalRefusedError(problem, run_id=run_id)
        denial = denial_sign(keyring=signer_for(TrustRoot.APPROVAL), run_id=run_id, pending=pending,
                             environment_instance_id=obs.instance_id, environment_fingerprint=obs.state_fingerprint,
                             environment_version=obs.version, approver=approver, reason=text, mode=chosen,
                             now=db_now())
        state_ledger(state).record_denied(denial)
        dropped = pending.model_dump(mode="json")
        state.pending = None
        payload = {"approver": approver, "reason": text, "mode": chosen.value, "pending": dropped,
                   "idempotency_key": pending.idempotency_key, "denial": denial.model_dump(mode="json")}
        if chosen is DenyMode.STOP:
            state.phase = transition(state.phase, Event.DENY)
            state.stop_reason = StopReason.APPROVAL_DENIED
            state.stop_detail = f"denied by {approver}: {text}"[:4000]
            session_commit(ctx, ("approval.denied", payload))
            return ApprovalOutcome(run_id, "denied", None, None, state.phase.value)
        state.phase = transition(state.phase, Event.DENY_CONTINUE)
        state.cursor = pending.cursor + 1
        state.stop_reason = None
        state.stop_detail = ""
        session_commit(ctx, ("approval.denied_with_feedback", payload))
        outcome = ApprovalOutcome(run_id, "denied_with_feedback", None, None, state.phase.value)
    # Looked up on the module at call time, so stories can record the hand-off instead.
    runtime.workers.dispatch.run_enqueue(run_id=run_id)
    return outcome
