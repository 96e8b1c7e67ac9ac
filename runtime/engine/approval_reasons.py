"""Who asked for a write that waits for approval, and which rule made it wait (DESIGN.md section 6.11).

Recorded in the ``intent.proposed`` event of a write that needs an approval, when the intent is
created: ``asked_by`` (the agent, its gateway token and the call id for a run driven through the
gateway; the planner for an in-process run) and ``approval_rule`` (the risk the action got, the
planner's rule that gave it, and the policy's ``approval_risks`` that list it). A planner says
where a risk came from through an optional ``risk_rule(kind, target) -> str`` method and who asked
through an optional ``asked_by() -> dict``; a planner without them is named by its kind.

Framework-free: plain data in, plain data out.
"""

from __future__ import annotations

from typing import Any

from runtime.core.checkpoint import Action, RunState


def approval_asked_by(*, planner: Any) -> dict[str, Any]:
    """Who proposed the write: ``{"via": "gateway", "agent", "token_id", "call_id"}`` for an
    agent's call through the gateway, else ``{"via": "planner", "planner": <kind>}``."""
    origin = getattr(planner, "asked_by", None)
    found = origin() if callable(origin) else None
    if isinstance(found, dict) and found:
        return {"via": "gateway", **found}
    return {"via": "planner", "planner": str(getattr(planner, "kind", type(planner).__name__))}


def approval_rule(*, state: RunState, action: Action, planner: Any) -> dict[str, Any]:
    """Which rule made ``action`` need an approval: ``{"risk", "risk_rule", "approval_risks",
    "policy_id", "policy_version"}``; ``risk_rule`` is the planner's own words for where the risk
    came from (``risks["delete_file"] = high``), or that the planner set it."""
    explain = getattr(planner, "risk_rule", None)
    rule = explain(action.kind, action.target) if callable(explain) else None
    kind = str(getattr(planner, "kind", "the"))
    return {
        "risk": str(action.risk),
        "risk_rule": rule or f"risk {action.risk} set by the {kind} planner",
        "approval_risks": [str(r) for r in state.scope.approval_risks],
        "policy_id": state.identity.policy_id,
        "policy_version": state.identity.policy_version,
    }


def approval_rule_text(rule: dict[str, Any] | None) -> str:
    """One readable sentence for an ``approval_rule`` record, or ``""`` when none was recorded."""
    if not rule:
        return ""
    listed = ", ".join(rule.get("approval_risks") or []) or "none"
    return (f"{rule.get('risk_rule')}; policy {rule.get('policy_id')} v{rule.get('policy_version')} needs an "
            f"approval for risks: {listed}")


def asked_by_text(asked: dict[str, Any] | None) -> str:
    """One readable phrase for an ``asked_by`` record, or ``""`` when none was recorded."""
    if not asked:
        return ""
    if asked.get("via") == "gateway":
        agent = asked.get("agent") or "an agent"
        return f"{agent} (gateway token {asked.get('token_id') or '—'}), call {asked.get('call_id') or '—'}"
    return f"the {asked.get('planner') or 'run'} planner (in process)"


def approval_reasons_recorded(*, state: RunState, payload: dict[str, Any] | None) -> dict[str, Any]:
    """``{"asked_by", "approval_rule"}`` for the write ``state`` waits on: as its ``intent.proposed``
    ``payload`` recorded them, else rebuilt from the checkpoint for a write proposed before they were
    recorded (the call id from the external planner's state, the policy's ``approval_risks``)."""
    payload = payload or {}
    pending = state.pending
    asked, rule = payload.get("asked_by"), payload.get("approval_rule")
    if not isinstance(asked, dict):
        asked = {}
        calls = state.planner_state.get("calls") if isinstance(state.planner_state, dict) else None
        for call_id, record in (calls or {}).items() if isinstance(calls, dict) else ():
            if pending is not None and isinstance(record, dict) and record.get("cursor") == pending.cursor \
                    and record.get("epoch") == pending.replan_epoch:
                asked = {"via": "gateway", "call_id": call_id}
    if not isinstance(rule, dict) and pending is not None:
        rule = {"risk": str(pending.action.risk),
                "risk_rule": f"risk {pending.action.risk} (the planner's rule was not recorded for this write)",
                "approval_risks": [str(r) for r in state.scope.approval_risks],
                "policy_id": state.identity.policy_id, "policy_version": state.identity.policy_version}
    return {"asked_by": asked, "approval_rule": rule or {}}
