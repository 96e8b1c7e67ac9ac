"""Proposing the next write: observe, ask the planner, check budget and policy, checkpoint the intent.

The first rows of the crash-window table (DESIGN.md section 5): nothing happens outside the run
before its intent -- action, intent digest, idempotency key, pre-state and the single expected
post-state -- is committed in a checkpoint, and a crash before that commit just re-proposes (the
planner is deterministic). The planner's new state is committed in that same checkpoint, so a
resume hands the planner exactly the state of the last commit (DESIGN.md section 5.10). A planner
(or verifier) plug-in that raises, or returns a state that is not bounded JSON, freezes the run
for review before anything is executed. A write whose risk the policy lists waits for an approval
with a dry-run diff attached (DESIGN.md section 6); a planner that says done hands over to the
verifier.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings

from runtime.checkpoints.session import (
    RunSession,
    observation_json,
    observation_matches,
    session_blob,
    session_blob_put,
    session_commit,
)
from runtime.core.checkpoint import Action, PendingAction, Phase, RunState, StopReason
from runtime.core.crashpoints import crash_point, register
from runtime.core.idempotency import derive_key
from runtime.core.ledger import state_ledger
from runtime.core.statemachine import Event, transition
from runtime.engine.approval_reasons import approval_asked_by, approval_rule
from runtime.engine.complete import run_complete
from runtime.engine.freeze import run_freeze, run_stop
from runtime.errors import EngineError, ModelBudgetExhaustedError, PluginError, PolicyViolationError
from runtime.evidence.amendments import previous_write_amendment
from runtime.evidence.attachments import attachment_blob, attachment_put
from runtime.evidence.trace import trace_append
from runtime.planners.base import ActionDenied, Done, PlannerStep, planner_state_check
from runtime.taskspec import needs_approval, policy_check

if TYPE_CHECKING:
    from runtime.adapters.base import Observation

CP_BEFORE_PROPOSE = register("engine.before_propose", "observed, about to ask the planner")
CP_AFTER_INTENT = register("engine.after_intent_commit", "pending intent checkpointed, no side effect yet")


def write_propose(session: RunSession) -> None:
    """Ask the planner for the next write of a running run and checkpoint its intent.

    Freezes on drift since the last checkpoint; completes the run when the planner is done;
    stops it when a budget is used up or the action breaks the policy.

    Raises:
        EngineError: the derived idempotency key is quarantined (the replan epoch did not advance).
        PlannerError / AdapterError: the planner or the adapter failed.
        LeaseLostError / StaleGenerationError: from the commit; another worker took over.
    """
    state = session.state
    session.proposing = None
    obs = session.adapter.observe()
    if obs.instance_id != state.environment.instance_id or not observation_matches(obs, state.environment):
        run_freeze(session, Event.ENVIRONMENT_DRIFT, StopReason.ENVIRONMENT_DRIFT,
                   "environment changed outside the run since the last checkpoint",
                   extra={"observed": observation_json(obs)})
        return
    crash_point(CP_BEFORE_PROPOSE)
    session.proposed_blobs.clear()  # only the newest proposal's blobs are kept
    bind_run = getattr(session.planner, "bind_run", None)
    if callable(bind_run):  # optional hook: a planner that traces its own events (DESIGN.md section 6.7)
        run_id = session.run_id
        bind_run(run_id=run_id, get_blob=attachment_blob,
                 trace=lambda event_type, payload: trace_append(run_id=run_id, event_type=event_type,
                                                                payload=payload))
    _amendment_bind(session)
    try:
        answer = planner_ask(session, obs)
        proposal, new_state = (answer.proposal, answer.state) if isinstance(answer, PlannerStep) else (
            answer, state.planner_state)
        if not isinstance(proposal, Action | Done):
            raise TypeError(f"propose() returned {type(proposal).__name__}, not an Action, Done or PlannerStep")
        new_state = planner_state_check(new_state)
    except ModelBudgetExhaustedError as exc:  # a planner's own budget is a budget, not a failure
        run_stop(session, Event.BUDGET_EXHAUSTED, StopReason.BUDGET_EXHAUSTED, exc.message, "run.budget_exhausted")
        return
    except Exception as exc:  # any planner failure fails closed: nothing is proposed or executed
        _planner_failed(session, exc)
        return
    state.planner_state = new_state
    if isinstance(proposal, Done):
        try:
            run_complete(session, obs, proposal)
        except PluginError as exc:  # a VerifierError (reference unreachable) stays retryable
            _planner_failed(session, exc, what="verifier")
        return
    exhausted = _budget_exhausted(state)
    if exhausted:
        run_stop(session, Event.BUDGET_EXHAUSTED, StopReason.BUDGET_EXHAUSTED, exhausted, "run.budget_exhausted")
        return
    state.usage.proposals += 1
    action = proposal
    try:
        policy_check(state.scope, action)
    except PolicyViolationError as exc:
        run_stop(session, Event.POLICY_VIOLATION, StopReason.POLICY_VIOLATION, exc.message, "run.policy_violation",
                 {"action": action.model_dump(mode="json")})
        return
    key = derive_key(run_id=session.run_id, cursor=state.cursor, replan_epoch=state.replan_epoch)
    if state_ledger(state).key_quarantined(key):
        raise EngineError("derived key is quarantined; the replan epoch did not advance", run_id=session.run_id,
                          idempotency_key=key)
    approval = needs_approval(state.scope, action)
    session.proposing = action.model_dump(mode="json")
    state.pending, payload = _intent(session, action, key=key, approval=approval)
    if approval:
        payload["asked_by"] = approval_asked_by(planner=session.planner)
        payload["approval_rule"] = approval_rule(state=state, action=action, planner=session.planner)
        diff = session.adapter.dry_run_diff(action, blobs=lambda d: session_blob(session, d))
        payload["dry_run_diff"] = attachment_put(data=diff.encode(), content_type="text/x-diff",
                                                 row_writes=session.within_commit)
        state.phase = transition(state.phase, Event.APPROVAL_REQUIRED)
        state.stop_reason = StopReason.APPROVAL_REQUIRED
        state.stop_detail = "waiting for a human approval"
        session_commit(session, ("intent.proposed", payload), ("approval.requested", {"idempotency_key": key}))
        return
    state.phase = transition(state.phase, Event.PROPOSE_WRITE)
    session_commit(session, ("intent.proposed", payload))
    crash_point(CP_AFTER_INTENT)


def planner_ask(session: RunSession, obs: Observation) -> Any:
    """The planner's answer at the state's cursor: its state is a copy (the planner returns a new
    one, never changes the committed one in place), and a planner that ``takes_denials`` is told
    whether its previous write was denied with feedback (``runtime.planners.base``)."""
    state = session.state
    extra: dict[str, Any] = {}
    if getattr(session.planner, "takes_denials", False) is True:
        extra["denied"] = denial_before(state)
    return session.planner.propose(cursor=state.cursor, planner_state=copy.deepcopy(state.planner_state),
                                   observation=obs, put_blob=lambda data: session_blob_put(session, data),
                                   **extra)


def denial_before(state: RunState) -> ActionDenied | None:
    """The signed denial of the write at ``cursor - 1`` (DESIGN.md section 6.14), or None.

    A denial advances the cursor without a replan, so it is found under the key of the previous
    cursor in the current epoch, or an earlier one if a replan came after it: at most one indexed
    ledger read per epoch, each cached."""
    if state.cursor == 0:
        return None
    ledger = state_ledger(state)
    for epoch in range(state.replan_epoch, -1, -1):
        found = ledger.denied(derive_key(run_id=state.identity.run_id, cursor=state.cursor - 1, replan_epoch=epoch))
        if found is not None and found.cursor == state.cursor - 1:
            return ActionDenied(cursor=found.cursor, idempotency_key=found.idempotency_key,
                                intent_digest=found.intent_digest, action_kind=found.action_kind,
                                action_target=found.action_target, reason=found.reason,
                                approver=found.approver, denial_id=found.denial_id)
    return None


def _intent(session: RunSession, action: Action, *, key: str,
            approval: bool) -> tuple[PendingAction, dict[str, Any]]:
    """The pending write of ``action`` at the state's cursor and its ``intent.proposed`` payload."""
    state = session.state
    intent = action.intent_digest()
    expected_post = session.adapter.predict_post_state(action, blobs=lambda d: session_blob(session, d))
    pending = PendingAction(
        action=action,
        intent_digest=intent,
        idempotency_key=key,
        cursor=state.cursor,
        replan_epoch=state.replan_epoch,
        pre_state=state.environment.model_copy(deep=True),
        expected_post_fingerprint=expected_post,
        requires_approval=approval,
        proposed_at=datetime.now(UTC),
    )
    payload: dict[str, Any] = {"idempotency_key": key, "intent_digest": intent, "cursor": state.cursor,
                               "action": action.model_dump(mode="json"), "requires_approval": approval,
                               "expected_post_fingerprint": expected_post}
    return pending, payload


def intent_fold(session: RunSession, obs: Observation) -> list[tuple[str, dict[str, Any]]]:
    """Propose the next write while the last one is settled, for the same checkpoint
    (DESIGN.md section 4.13): one commit per write in steady state.

    Only with ``RATCHET_FOLD_INTENTS`` on, for a planner that says it ``proposes_at_once``
    (``runtime.planners.base``), and only
    when the answer is a plain write that may go ahead at once: an :class:`Action` within budget
    and policy, needing no approval, under a key that is not quarantined. The state must be the
    settled one (phase running, cursor past the last write, ``obs`` its environment). Then the
    pending write, the planner's new state and the proposal count are set on the state and the
    ``intent.proposed`` event is returned for the caller's commit. Anything else -- ``Done``, an
    approval to wait for, a stop, or any exception of the planner or the adapter -- leaves the
    state and the session's queued rows as they were and returns ``[]``: the last write commits
    alone and the next step asks again, handling the answer exactly as :func:`write_propose`
    does (the planner is deterministic, so it answers the same).

    Crash windows (DESIGN.md section 5.3): the last write's receipt and this intent become
    durable together; a kill before that commit leaves the last write pending, and its
    recovery reconciles the receipt and proposes this write again.
    """
    state = session.state
    if (not settings.RATCHET_FOLD_INTENTS or state.phase != Phase.RUNNING
            or getattr(session.planner, "proposes_at_once", False) is not True):
        return []
    crash_point(CP_BEFORE_PROPOSE)
    queued = len(session.within_commit)
    session.proposed_blobs.clear()
    try:
        _amendment_bind(session)
        answer = planner_ask(session, obs)
        action, new_state = (answer.proposal, answer.state) if isinstance(answer, PlannerStep) else (
            answer, state.planner_state)
        key = derive_key(run_id=session.run_id, cursor=state.cursor, replan_epoch=state.replan_epoch)
        if (not isinstance(action, Action) or _budget_exhausted(state) or needs_approval(state.scope, action)
                or state_ledger(state).key_quarantined(key)):
            raise _NotNow
        policy_check(state.scope, action)
        new_state = planner_state_check(new_state)
        pending, payload = _intent(session, action, key=key, approval=False)
    except Exception:  # _NotNow, a policy violation, a planner or adapter error: the next step decides
        del session.within_commit[queued:]
        session.proposed_blobs.clear()
        return []
    state.planner_state = new_state
    state.usage.proposals += 1
    state.pending = pending
    state.phase = transition(state.phase, Event.PROPOSE_WRITE)
    return [("intent.proposed", payload)]


def _amendment_bind(session: RunSession) -> None:
    """Tell a planner that takes it (optional hook ``bind_amendment``) whether the write at the
    previous cursor ran with arguments an approver amended (DESIGN.md section 6.13). Read from the
    trace the amendment was committed with, so every process tells the same; None otherwise."""
    bind = getattr(session.planner, "bind_amendment", None)
    if callable(bind):
        bind(amendment=previous_write_amendment(run_id=session.run_id, state=session.state))


class _NotNow(Exception):
    """The next proposal is not a write that may go ahead at once."""


def _planner_failed(session: RunSession, exc: Exception, *, what: str = "planner") -> None:
    """Freeze the run for review, naming the plug-in's exception; the state is left as committed."""
    detail = f"the {what} failed, nothing was executed: {type(exc).__name__}: {str(exc)[:1000]}"
    # A verifier that gave no verdict has its own stop reason (DESIGN.md section 6.5); the event
    # is the same plug-in failure: running -> needs_review.
    reason = StopReason.VERIFIER_ERROR if what == "verifier" else StopReason.PLANNER_FAILED
    error: dict[str, Any] = {"what": what, "type": type(exc).__name__, "message": str(exc)[:1000]}
    context = getattr(exc, "context", None)
    if isinstance(context, dict) and isinstance(context.get("output_digest"), str):
        error["output_digest"] = context["output_digest"]  # the verifier command's output so far
    run_freeze(session, Event.PLANNER_FAILED, reason, detail, extra={"plugin_error": error})


def _budget_exhausted(state: RunState) -> str | None:
    u, lim = state.usage, state.limits
    if u.proposals >= lim.proposals:
        return f"proposal budget of {lim.proposals} used"
    if u.steps >= lim.steps:
        return f"step budget of {lim.steps} used"
    if u.wall_seconds >= lim.wall_seconds:
        return f"wall-time budget of {lim.wall_seconds} s used"
    return None
