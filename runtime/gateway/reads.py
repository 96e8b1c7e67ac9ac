"""What an agent may read about its run: status, tools, one call, the receipts (DESIGN.md section 5.12).

Everything comes from the run row and the committed, verified checkpoint (``checkpoint_verify``):
the call ids, their keys and the receipts in the ledger, exactly what the dashboard shows. Each
read needs a token for the run and counts against its rate limit (``admitted``: a token row the
request already authorised and counted, see ``runtime.gateway.tokens.token_request_admit``);
nothing here changes the run.
"""

from __future__ import annotations

from typing import Any

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.idempotency import derive_key
from runtime.core.ledger import state_ledger
from runtime.errors import GatewayInputError
from runtime.gateway.calls import dashboard_url
from runtime.gateway.tokens import token_admit
from runtime.gateway.tools import call_id_check, run_spec, run_tools
from runtime.models import GatewayToken, Run


def _authorised(*, run_id: str, token: str | None, admitted: GatewayToken | None) -> tuple[GatewayToken, Run]:
    return token_admit(token=token, run_id=run_id, admitted=admitted)


def run_status(*, run_id: str, token: str | None = None, admitted: GatewayToken | None = None) -> dict[str, Any]:
    """``{"run_id", "tenant_id", "phase", "stop_reason", "generation", "dashboard_url", "tools"}``.

    ``tools`` lists ``{"name", "description", "input_schema"}`` the token may call.

    Raises:
        GatewayTokenError / GatewayScopeError / GatewayRateLimitedError.
    """
    row, run = _authorised(run_id=run_id, token=token, admitted=admitted)
    spec = run_spec(stored=run.spec["task"])
    tools = [t.__dict__ for t in run_tools(spec=spec, token_actions=row.actions)]
    return {"run_id": run.run_id, "tenant_id": run.tenant_id, "phase": run.phase,
            "stop_reason": run.stop_reason or None, "generation": run.generation,
            "dashboard_url": dashboard_url(run_id=run_id), "tools": tools}


def _calls(state: Any) -> dict[str, dict[str, Any]]:
    calls = state.planner_state.get("calls") if isinstance(state.planner_state, dict) else None
    return calls if isinstance(calls, dict) else {}


def receipts_list(*, run_id: str, token: str | None = None,
                  admitted: GatewayToken | None = None) -> list[dict[str, Any]]:
    """Every executed write of the run, oldest first, with the call id that caused it (or None).

    Raises:
        GatewayTokenError / GatewayScopeError / GatewayRateLimitedError; CheckpointError
        subclasses when the committed checkpoint does not verify.
    """
    _authorised(run_id=run_id, token=token, admitted=admitted)
    state = checkpoint_verify(run_id=run_id).state
    by_key = {derive_key(run_id=run_id, cursor=int(r["cursor"]), replan_epoch=int(r["epoch"])): call_id
              for call_id, r in _calls(state).items()}
    return [{"call_id": by_key.get(w.idempotency_key), "idempotency_key": w.idempotency_key,
             "intent_digest": w.intent_digest, "receipt": w.receipt.model_dump(mode="json"),
             "receipt_fingerprint": w.receipt_fingerprint, "reconciled": w.reconciled}
            for w in state_ledger(state).executed_writes()]


def call_get(*, run_id: str, call_id: str, token: str | None = None,
             admitted: GatewayToken | None = None) -> dict[str, Any]:
    """One recorded call: ``{"call_id", "idempotency_key", "status", "receipt"}``.

    ``status`` is ``"executed"`` (receipt given), ``"pending"`` (recorded, not yet executed:
    waiting for an approval or for recovery), ``"denied"`` (a person refused it: ``reason``,
    ``denied_by``, ``mode``; DESIGN.md section 6.14) or ``"unknown"`` (never recorded).

    Raises:
        GatewayInputError: a malformed call id; as :func:`receipts_list`.
    """
    call_id = call_id_check(call_id)
    _authorised(run_id=run_id, token=token, admitted=admitted)
    state = checkpoint_verify(run_id=run_id).state
    record = _calls(state).get(call_id)
    if record is None:
        return {"call_id": call_id, "status": "unknown"}
    if not isinstance(record, dict):
        raise GatewayInputError("the recorded call is malformed", run_id=run_id, call_id=call_id)
    key = derive_key(run_id=run_id, cursor=int(record["cursor"]), replan_epoch=int(record["epoch"]))
    executed = state_ledger(state).executed(key)
    if executed is None:
        denial = state_ledger(state).denied(key)
        if denial is not None:
            return {"call_id": call_id, "idempotency_key": key, "status": "denied", "phase": state.phase.value,
                    "reason": denial.reason, "denied_by": denial.approver, "mode": denial.mode.value}
        return {"call_id": call_id, "idempotency_key": key, "status": "pending", "phase": state.phase.value}
    return {"call_id": call_id, "idempotency_key": key, "status": "executed",
            "intent_digest": executed.intent_digest, "receipt": executed.receipt.model_dump(mode="json")}


def approval_pending(*, run_id: str, token: str | None = None,
                     admitted: GatewayToken | None = None) -> dict[str, Any]:
    """The approval the run waits for, if any (DESIGN.md section 5.13).

    ``{"run_id", "waiting", "phase"}``, and while ``waiting``: ``"call_id"`` (None for an
    intent no gateway call proposed), ``"idempotency_key"``, ``"intent_digest"``, ``"kind"``,
    ``"target"``, ``"risk"`` and the absolute ``"approval_url"`` where a human approves. Reading
    it never grants, extends or records an approval.

    Raises:
        as :func:`receipts_list`.
    """
    _authorised(run_id=run_id, token=token, admitted=admitted)
    state = checkpoint_verify(run_id=run_id).state
    pending = state.pending
    if state.phase.value != "awaiting_approval" or pending is None:
        return {"run_id": run_id, "waiting": False, "phase": state.phase.value}
    by_key = {derive_key(run_id=run_id, cursor=int(r["cursor"]), replan_epoch=int(r["epoch"])): call_id
              for call_id, r in _calls(state).items()}
    action = pending.action
    return {"run_id": run_id, "waiting": True, "phase": state.phase.value,
            "call_id": by_key.get(pending.idempotency_key), "idempotency_key": pending.idempotency_key,
            "intent_digest": pending.intent_digest, "kind": action.kind, "target": action.target,
            "risk": action.risk.value if hasattr(action.risk, "value") else str(action.risk),
            "approval_url": dashboard_url(run_id=run_id)}
