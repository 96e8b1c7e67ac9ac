"""The external planner: a run whose actions come from an agent's calls through the gateway.

Such a run has no in-process planner (DESIGN.md section 5.12). The gateway offers one call at a
time (:func:`external_call_offered`, a context variable of the calling thread) and drives the
ordinary engine (``run_advance``); this planner proposes exactly the offered call's action and
records in its state, committed with the intent, the call id, the cursor and replan epoch that
fix its idempotency key, and the digest of the call as sent. A repeated call id is answered
from that record (same digest: the original receipt; other digest: a conflict), never proposed
twice. Without an offered call the planner halts the step loop (``halt_before_step``), so a
sweeper or ``manage.py resume`` only settles a write in flight and then waits for the agent.

Framework-free: nothing here imports Django.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.canonical import canonical_json, digest_bytes
from runtime.core.checkpoint import TERMINAL_PHASES, Action, Phase, Risk
from runtime.errors import PlannerError, PlannerStateError
from runtime.planners.base import Done, PlannerContext, PlannerState, PlannerStep, PutBlob, check_cursor
from runtime.taskspec import glob_match

if TYPE_CHECKING:
    from runtime.adapters.base import Observation

FINISH = "finish"
"""The call kind with which an agent says the run is done (the verifier then decides)."""


class ExternalPlannerOptions(BaseModel):
    """``[planner] kind = "external"`` options.

    ``risks`` (by action kind; a kind not named is high, as for the chat-tools planner) and
    ``risk_paths`` (by target glob) give an action its risk, the highest applying; the caller
    never sets a risk, so it cannot talk its way past an approval. ``max_calls`` bounds the
    calls one run records (its planner state stays under 64 KiB).
    """

    model_config = ConfigDict(extra="forbid")
    risks: dict[str, Risk] = Field(default_factory=lambda: {"write_file": Risk.LOW, "delete_file": Risk.HIGH})
    risk_paths: dict[str, Risk] = Field(default_factory=dict)
    max_calls: int = Field(default=200, ge=1, le=300)


@dataclass
class ExternalCall:
    """One call offered to the planner by the gateway.

    Attributes:
        call_id: the caller's own id for the call (1-64 characters).
        action: ``{"kind", "target", "params"}`` as the caller sent it, or ``{"kind": "finish"}``.
        digest: ``call_digest`` of ``action``.
        session: the last run session the step loop showed the planner (for the gateway's answer).
        proposed: set once the planner proposed this call.
        epoch: the replan epoch the call was proposed in.
        origin: who sent it (``{"agent", "token_id"}`` of the gateway token), for an approval card.
        commit_writes: writes the commit that records the call runs in its transaction (the
            gateway's count of the call against its token's rate limit, DESIGN.md section 5.12):
            handed to the session right before the step that proposes the call, so a call
            answered from what is recorded (a repeated call id) writes nothing.
    """

    call_id: str
    action: dict[str, Any]
    digest: str
    session: Any = None
    proposed: bool = False
    epoch: int = 0
    origin: dict[str, Any] | None = None
    commit_writes: list[Any] = field(default_factory=list)


_OFFERED: ContextVar[ExternalCall | None] = ContextVar("ratchet_external_call", default=None)


@contextmanager
def external_call_offered(call: ExternalCall) -> Iterator[ExternalCall]:
    """Offer ``call`` to an external planner run by this thread for the duration of the block."""
    token = _OFFERED.set(call)
    try:
        yield call
    finally:
        _OFFERED.reset(token)


def call_digest(action: Mapping[str, Any]) -> str:
    """The canonical digest of a call's action as the caller sent it (``sha256:<hex>``)."""
    return digest_bytes(canonical_json(dict(action)))


def call_record(planner_state: Mapping[str, Any], call_id: str) -> dict[str, Any] | None:
    """The recorded call ``{"cursor", "epoch", "digest"}`` for ``call_id``, or None."""
    calls = planner_state.get("calls")
    found = calls.get(call_id) if isinstance(calls, dict) else None
    return found if isinstance(found, dict) else None


class ExternalPlanner:
    """Proposes the call the gateway offers (see :mod:`runtime.planners.external`).

    A planner plug-in (entry point ``external`` in ``ratchet.planners``, DESIGN.md sections 5.10
    and 5.12).

    Args:
        options: :class:`ExternalPlannerOptions`.
        context: unused.
    """

    kind = "external"
    Options = ExternalPlannerOptions
    offers_adapter_actions = True  # a spec whose policy allows none is refused (runtime.taskspec.offered_actions)

    def __init__(self, *, options: ExternalPlannerOptions, context: PlannerContext | None = None) -> None:
        self.options = options

    def init_state(self) -> PlannerState:
        """``{"kind": "external", "calls": {}}``."""
        return {"kind": self.kind, "calls": {}}

    def prepare_environment(self, target: Path) -> None:
        """Nothing to prepare: the adapter owns its environment."""

    def risk_of(self, kind: str, target: str) -> Risk:
        """The highest risk ``risks`` and ``risk_paths`` give the action (a kind not named: high)."""
        order = [Risk.LOW, Risk.MEDIUM, Risk.HIGH]
        found = [self.options.risks.get(kind, Risk.HIGH)]
        found += [risk for pattern, risk in self.options.risk_paths.items() if target and glob_match(pattern, target)]
        return max(found, key=order.index)

    def risk_rule(self, kind: str, target: str) -> str:
        """Where :meth:`risk_of` took the action's risk from, in words (DESIGN.md section 6.11)."""
        risk = self.risk_of(kind, target)
        for pattern, found in self.options.risk_paths.items():
            if found == risk and target and glob_match(pattern, target):
                return f"external planner risk_paths[{pattern!r}] = {risk}"
        if kind in self.options.risks:
            return f"external planner risks[{kind!r}] = {risk}"
        return f"external planner: no risk configured for {kind!r}, so {risk}"

    def asked_by(self) -> dict[str, Any] | None:
        """The offered call's id and sender, or None without one (DESIGN.md section 6.11)."""
        call = _OFFERED.get()
        if call is None:
            return None
        return {"call_id": call.call_id, **(call.origin or {})}

    def halt_before_step(self, session: Any) -> bool:
        """Whether the engine's step loop stops before its next step (DESIGN.md section 5.12).

        A write in flight is always settled first (recovery before the next call is admitted);
        then the loop stops unless a call is offered that this run has not recorded yet.
        """
        call = _OFFERED.get()
        state = session.state
        if call is not None:
            call.session = session
        if state.phase in TERMINAL_PHASES or state.phase in (Phase.NEEDS_REVIEW, Phase.AWAITING_APPROVAL):
            return True
        if state.phase == Phase.PENDING:
            return False
        if call is None or call.proposed:
            return True
        if call_record(state.planner_state, call.call_id) is not None:
            # Recorded already: the gateway answers from the checkpoint (the receipt, the wait, or
            # a conflict its own records explain); nothing is proposed (DESIGN.md section 5.12).
            return True
        call.epoch = state.replan_epoch
        # The next step proposes this call and commits it (or freezes, or cancels): that commit
        # carries the call's own writes.
        session.within_commit.extend(call.commit_writes)
        call.commit_writes = []
        return False

    def propose(self, *, cursor: int, planner_state: Mapping[str, Any], observation: Observation,
                put_blob: PutBlob) -> PlannerStep:
        """The offered call's action, with the call recorded in the new state; or Done for ``finish``.

        Raises:
            PlannerStateError: the state was not made by this planner.
            PlannerError: no call is offered, or it was already recorded (the engine freezes
                the run: this cannot happen when the gateway drives it).
        """
        check_cursor(cursor)
        if planner_state.get("kind") != self.kind or not isinstance(planner_state.get("calls"), dict):
            raise PlannerStateError("planner state was not made by the external planner")
        call = _OFFERED.get()
        if call is None or call.proposed or call_record(planner_state, call.call_id) is not None:
            raise PlannerError("no unrecorded call is offered to the external planner")
        call.proposed = True
        state = {"kind": self.kind, "calls": dict(planner_state["calls"])}
        if call.action.get("kind") == FINISH:
            return PlannerStep(proposal=Done(reason=f"the agent finished the run (call {call.call_id})"),
                               state=state)
        state["calls"][call.call_id] = {"cursor": cursor, "epoch": call.epoch, "digest": call.digest}
        return PlannerStep(proposal=self._action(call.action, put_blob), state=state)

    def _action(self, sent: Mapping[str, Any], put_blob: PutBlob) -> Action:
        kind, target = str(sent["kind"]), str(sent.get("target") or "")
        params = dict(sent.get("params") or {})
        if kind == "write_file":  # file content travels as text and is stored content-addressed
            params = {"content": put_blob(str(params.get("content", "")).encode("utf-8")),
                      "executable": bool(params.get("executable", False))}
        return Action(kind=kind, target=target, params=params, risk=self.risk_of(kind, target))
