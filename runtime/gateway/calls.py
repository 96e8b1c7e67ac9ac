"""A call from an agent outside the process, through the run's whole write path (DESIGN.md section 5.12).

:func:`call_submit` checks the token, the rate limit, the call's shape and the policy -- all
before anything is touched -- then offers the call to the run's external planner and drives the
ordinary engine (``run_advance``): recovery of a write in flight (a gateway killed mid-call),
policy gate, intent checkpoint, approval, execution by idempotency key, receipt, checkpoint.
The call id is bound to its cursor and replan epoch -- hence its key -- in the checkpoint that
records the intent, so a repeated call id gets the original receipt (same arguments) or a
conflict (other arguments), never a second effect. A call without an id gets one derived from
the run, the tool and the canonical arguments (``call_id_derive``), so an identical repeated
call is answered from the ledger. A conflict changes nothing: the runtime's own records explain
it, so the run goes on (only an adapter's receipt that contradicts those records freezes a run).
"""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any, Literal

from django.conf import settings
from django.db import DatabaseError
from django.urls import reverse
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.checkpoints.session import RunSession, default_worker_id, session_release
from runtime.core.checkpoint import Phase, RunState
from runtime.core.idempotency import derive_key
from runtime.core.ledger import state_ledger
from runtime.core.tracing import run_scope, span, span_annotate
from runtime.decisions.case_sides import readable, unified
from runtime.engine import run_advance
from runtime.errors import (
    GatewayCallConflictError,
    GatewayCallLimitError,
    GatewayRunBusyError,
    GatewayRunStoppedError,
    GatewayWaitingForApprovalError,
    LeaseHeldError,
    LeaseLostError,
    StaleGenerationError,
)
from runtime.evidence.amendments import amendment_for
from runtime.gateway.rate_limits import token_count_write
from runtime.gateway.sessions import (
    session_begin_call,
    session_may_stay_warm,
    session_put,
    session_reuse,
    session_take,
    session_warm_ready,
)
from runtime.gateway.tokens import token_admit, token_request_check
from runtime.gateway.tools import (
    MAX_CALL_BYTES,
    arguments_object,
    call_check,
    call_id_check,
    call_id_derive,
    run_spec,
)
from runtime.models import GatewayToken, Run, TraceEvent
from runtime.planners.chat_tools.tools import FINISH
from runtime.planners.external import ExternalCall, call_digest, call_record, external_call_offered


class CallResult(BaseModel):
    """What a call did: the MCP server's structured result and the JSON API's response body
    (its OpenAPI schema, DESIGN.md section 5.12)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["executed", "waiting_for_approval", "finished", "denied"] = Field(description=(
        "executed: the receipt is here; waiting_for_approval: a human must approve in the dashboard "
        "(approval_url), then repeat the same call id and it executes once; finished: the run completed "
        "(a run that ended failed or cancelled answers finish with the run_stopped error); denied: a human "
        "refused this write and let the run go on (detail: their reason; it never executes): try something else"))
    run_id: str
    call_id: str = Field(description=(
        "the caller's own id for the call, or the one the gateway derived from the run, the tool and the "
        "arguments when none was sent; repeating it never repeats the effect"))
    phase: str = Field(description="the run's phase after the call")
    idempotency_key: str | None = Field(default=None, description="derived from the run and the call id")
    intent_digest: str | None = None
    receipt: dict[str, JsonValue] | None = Field(default=None, description="the adapter's receipt of the write")
    repeated: bool = Field(default=False, description="the call id was already recorded; nothing new executed")
    approval_url: str | None = Field(default=None, description=(
        "the absolute address of the dashboard page where a human approves (RATCHET_PUBLIC_BASE_URL)"))
    stop_reason: str | None = None
    detail: str | None = None
    amended: dict[str, JsonValue] | None = Field(default=None, description=(
        "present when an approver amended the call's arguments before approving (DESIGN.md section 6.13): "
        "the write executed with amended.executed (kind, target, params), not with the arguments sent; "
        "amended.proposed is what the call proposed, amended.amended_by and amended.note who and why"))
    denial: dict[str, JsonValue] | None = Field(default=None, description=(
        "when denied: the signed denial (approver, reason, the write and environment it is bound to)"))

    def as_json(self) -> dict[str, Any]:
        """The result as the MCP server returns it (fields without a value left out)."""
        return self.model_dump(mode="json", exclude_none=True)


def gateway_worker_id() -> str:
    """This process and thread as a lease holder: two threads of one gateway never share a lease."""
    return f"{default_worker_id()}/gateway-{threading.get_ident()}"[:200]


def public_base_url() -> str:
    """The address people and agents reach the web process at, without a trailing slash
    (``RATCHET_PUBLIC_BASE_URL``; it defaults to ``RATCHET_DASHBOARD_URL``, else
    ``http://localhost:8000``): a link the gateway hands out is always absolute, so an agent can
    show it (DESIGN.md section 5.12)."""
    return str(settings.RATCHET_PUBLIC_BASE_URL).rstrip("/")


def dashboard_url(*, run_id: str) -> str:
    """The absolute address of the run's page in the dashboard (:func:`public_base_url` prefixes it)."""
    return public_base_url() + reverse("review:run", args=[run_id])


def call_submit(*, run_id: str, call_id: Any, tool: Any, arguments: Any, token: str | None = None,
                admitted: GatewayToken | None = None) -> CallResult:
    """Put one agent call through the run's write path and say what happened (DESIGN.md section 5.12).

    Args:
        run_id: the run the call is for.
        call_id: the caller's id for the call; repeating it never repeats the effect. None or
            ``""``: derived from the run, the tool and the arguments (``call_id_derive``).
        tool: the action kind (a tool the run offers) or ``"finish"``.
        arguments: the tool's arguments (a JSON object).
        token: the agent's gateway token (never logged or echoed); or
        admitted: the token row this request already authorised and counted
            (``token_request_admit``): the token is not read again.

    Returns:
        A :class:`CallResult`.

    Raises:
        GatewayTokenError / GatewayScopeError / GatewayRateLimitedError: refused before anything.
        GatewayInputError (and its subclasses) / GatewayPolicyRefusedError: refused, nothing touched.
        GatewayCallConflictError: the call id was recorded with other arguments; nothing was
            executed or recorded and the run goes on (``executed`` in the context says whether the
            first call's write had executed).
        GatewayWaitingForApprovalError: another call of the run waits for a human's approval
            (retryable; ``approval_url`` in the context).
        GatewayRunStoppedError: the run is frozen for review or has ended (with phase and reason).
        GatewayRunBusyError: another process holds the lease (retry the same call id).
        GatewayCallLimitError: the run recorded ``max_calls`` calls.

    Traced (when tracing is on) as a ``ratchet.gateway.call`` span in the caller's trace (the web
    request's, or the MCP session's); the engine's spans of the call sit in the run's own trace and
    link back to it (DESIGN.md section 8.6).
    """
    with run_scope(run_id), span("ratchet.gateway.call", attributes={
            "ratchet.run_id": run_id, "ratchet.gateway.tool": str(tool)[:200]}) as current:
        result = _call_submit(run_id=run_id, call_id=call_id, tool=tool, arguments=arguments, token=token,
                              admitted=admitted)
        span_annotate(current, {"ratchet.gateway.status": result.status, "ratchet.phase": result.phase,
                                "ratchet.idempotency_key": result.idempotency_key,
                                "ratchet.gateway.repeated": result.repeated})
        return result


def _call_submit(*, run_id: str, call_id: Any, tool: Any, arguments: Any, token: str | None,
                 admitted: GatewayToken | None) -> CallResult:
    # Authorised by a read; the call is counted by its first commit (DESIGN.md section 5.12).
    row, run = token_admit(run_id=run_id, admitted=admitted or token_request_check(token=token))
    if call_id is None or call_id == "":
        call_id = call_id_derive(run_id=run_id, tool=tool, arguments=arguments)
    call_id = call_id_check(call_id)
    spec = run_spec(stored=run.spec["task"])
    action = call_check(spec=spec, tool=tool, arguments=arguments_object(arguments), token_actions=row.actions,
                        max_bytes=int(getattr(settings, "RATCHET_GATEWAY_MAX_BYTES", MAX_CALL_BYTES)))
    call = ExternalCall(call_id=call_id, action=action, digest=call_digest(action),
                        origin={"agent": row.agent, "token_id": row.token_id},
                        commit_writes=[token_count_write(token_id=row.token_id)])
    wait = float(getattr(settings, "RATCHET_GATEWAY_WAIT_SECONDS", 10.0))
    kept = session_take(run_id=run_id, wait_seconds=wait)
    warm = kept is not None and kept.warm and session_warm_ready(kept)
    if kept is not None and kept.warm and not warm:
        kept = None  # its lease is gone: restore under a new one
    held_since = kept.held_since if warm else time.monotonic()  # type: ignore[union-attr]
    if warm:
        session_begin_call(kept.session)  # type: ignore[union-attr]
    try:
        with external_call_offered(call):
            run_advance(run_id=run_id, worker=gateway_worker_id(), wait_seconds=wait,
                        held=kept.session if warm else None,  # type: ignore[union-attr]
                        reuse=partial(session_reuse, kept=kept.session if kept is not None and not warm else None),
                        hold=partial(session_may_stay_warm, held_since=held_since))
    except BaseException as exc:
        _call_failed(run_id=run_id, session=call.session or (kept.session if warm else None))  # type: ignore[union-attr]
        if isinstance(exc, LeaseHeldError):
            raise GatewayRunBusyError(run_id=run_id, call_id=call_id) from None
        if isinstance(exc, LeaseLostError | StaleGenerationError):
            raise GatewayRunBusyError("another process took the run over during the call", run_id=run_id,
                                      call_id=call_id) from None
        raise
    session = call.session
    try:
        return _answer(run=run, call=call, max_calls=int(spec.planner.options_json().get("max_calls", 200)))
    finally:
        # Kept only once the answer is read from it: the next call of this run may take it at
        # once, warm (its lease still held) or restored (DESIGN.md section 5.12).
        session_put(run_id=run_id, session=session, warm=session is not None and not session.released,
                    held_since=held_since)


def _call_failed(*, run_id: str, session: RunSession | None) -> None:
    """A call that raised keeps no session. The lease goes back if ``session`` still holds it:
    nothing after the last commit is trusted, so the next call restores and recovers from the
    committed head (the crash-window table settles a write in flight), without waiting for the
    lease to expire. A lease already lost stays with whoever holds it."""
    if session is not None and not session.released:
        try:
            session_release(session)
        except (LeaseLostError, DatabaseError):
            pass  # lost or unreachable: it expires by the database clock (DESIGN.md section 4.5)
    session_put(run_id=run_id, session=None, warm=False)


_SIDE_MAX_BYTES = 16384
"""Largest pair of argument sets a conflict answer repeats in full (bytes); larger ones are
named by their digests only, so an answer stays small."""


def _conflict_sides(*, run_id: str, key: str, sent: dict[str, Any]) -> dict[str, Any]:
    """Both sides of a call-id conflict in readable form for the caller (DESIGN.md section 6.11):
    the action recorded under the call id (from its ``intent.proposed`` event) and the one just
    sent, each as plain lines (small text contents inline), and their line diff."""
    recorded = (TraceEvent.objects.filter(run_id=run_id, event_type="intent.proposed",
                                          payload__idempotency_key=key)
                .order_by("seq").values_list("payload", flat=True).first() or {}).get("action")
    if not isinstance(recorded, dict):
        return {}
    old = readable(kind=recorded.get("kind"), target=recorded.get("target"), params=recorded.get("params") or {})
    new = readable(kind=sent.get("kind"), target=sent.get("target"), params=sent.get("params") or {})
    if len(old.encode()) + len(new.encode()) > _SIDE_MAX_BYTES:
        return {}
    diff, _ = unified(old, new, old_name="recorded", new_name="sent")
    return {"recorded_arguments": old, "sent_arguments": new, "diff": "\n".join(diff)}


def _answer(*, run: Run, call: ExternalCall, max_calls: int) -> CallResult:
    run_id, call_id = run.run_id, call.call_id
    # An ended run is not stepped: a repeated call is answered from its committed checkpoint.
    state: RunState = call.session.state if call.session is not None else checkpoint_verify(run_id=run_id).state
    phase = state.phase
    if call.action["kind"] == FINISH:
        if phase == Phase.COMPLETED:
            return CallResult(status="finished", run_id=run_id, call_id=call_id, phase=phase.value,
                              stop_reason=_reason(state), detail=state.stop_detail or None,
                              repeated=call.session is None)
        raise _stopped(state, run_id, call_id)
    record = call_record(state.planner_state, call_id)
    if record is None:
        if phase == Phase.RUNNING and len(state.planner_state.get("calls") or {}) >= max_calls:
            raise GatewayCallLimitError(run_id=run_id, call_id=call_id, max_calls=max_calls)
        raise _stopped(state, run_id, call_id)
    key = derive_key(run_id=run_id, cursor=int(record["cursor"]), replan_epoch=int(record["epoch"]))
    if record["digest"] != call.digest:
        # The runtime's own records explain the conflict: refused, nothing changes, the run goes
        # on (DESIGN.md section 5.12, "Call ids").
        executed = state_ledger(state).executed(key) is not None
        raise GatewayCallConflictError(
            f"call id {call_id!r} was already used with other arguments"
            + (" and its write executed" if executed else "") + "; nothing was executed for this call",
            run_id=run_id, call_id=call_id, phase=phase.value, executed=executed, idempotency_key=key,
            recorded_digest=record["digest"], sent_digest=call.digest,
            **_conflict_sides(run_id=run_id, key=key, sent=call.action))
    pending = state.pending
    if pending is not None and pending.idempotency_key == key:
        if phase == Phase.AWAITING_APPROVAL:
            return CallResult(status="waiting_for_approval", run_id=run_id, call_id=call_id, phase=phase.value,
                              idempotency_key=key, intent_digest=pending.intent_digest,
                              repeated=not call.proposed, approval_url=dashboard_url(run_id=run_id),
                              detail="a human must approve this write in the dashboard; then repeat the "
                                     "same call id and it executes once")
        raise _stopped(state, run_id, call_id)
    executed = state_ledger(state).executed(key)
    if executed is None:
        denial = state_ledger(state).denied(key)
        if denial is not None and denial.mode.value == "continue":
            # The answer to the waiting call: the approver's reason is its outcome (DESIGN.md section 6.14).
            return CallResult(status="denied", run_id=run_id, call_id=call_id, phase=phase.value, idempotency_key=key,
                              intent_digest=denial.intent_digest, repeated=not call.proposed,
                              detail=f"denied by {denial.approver}: {denial.reason}",
                              denial=denial.model_dump(mode="json"))
        raise _stopped(state, run_id, call_id)
    amendment = amendment_for(run_id=run_id, idempotency_key=key)
    return CallResult(status="executed", run_id=run_id, call_id=call_id, phase=phase.value, idempotency_key=key,
                      intent_digest=executed.intent_digest, receipt=executed.receipt.model_dump(mode="json"),
                      repeated=not call.proposed, stop_reason=_reason(state),
                      amended=amendment.as_json() if amendment is not None
                      and amendment.executed_intent_digest == executed.intent_digest else None)


def _reason(state: RunState) -> str | None:
    return state.stop_reason.value if state.stop_reason else None


def _stopped(state: RunState, run_id: str, call_id: str) -> GatewayRunStoppedError | GatewayWaitingForApprovalError:
    if state.phase == Phase.AWAITING_APPROVAL:
        # Neither frozen nor ended: the call goes through once a human settles the approval.
        pending = state.pending
        return GatewayWaitingForApprovalError(
            run_id=run_id, call_id=call_id, phase=state.phase.value, approval_url=dashboard_url(run_id=run_id),
            waiting_for=pending.idempotency_key if pending is not None else None)
    detail = (state.stop_detail or "")[:300]
    return GatewayRunStoppedError(f"the run is {state.phase.value}: {detail}" if detail else None, run_id=run_id,
                                  call_id=call_id, phase=state.phase.value, stop_reason=_reason(state),
                                  dashboard=dashboard_url(run_id=run_id))
