"""A deterministic planner for the SQL stories, loaded by dotted path (``planner.kind = "python"``).

It proposes one ``record_order`` action per order listed in its options, in order: the kind of
small planner a user writes for their own agent, with no change to Ratchet's code.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from runtime.core.checkpoint import Action, Risk
from runtime.planners.base import Done, PlannerState, Proposal


class OrderLine(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    order_id: str
    customer: str
    card: str
    amount_cents: int
    risk: str = "low"


class OrdersOptions(BaseModel):
    """``[planner]`` options: ``kind``/``entry`` and the orders to record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    orders: list[OrderLine]


class OrdersPlanner:
    """Proposes ``record_order`` for each configured order; ``card`` names a secret input of the adapter."""

    Options = OrdersOptions

    def __init__(self, *, options: OrdersOptions, context: Any = None) -> None:
        self._orders = options.orders

    def init_state(self) -> PlannerState:
        return {"orders": len(self._orders)}

    def prepare_environment(self, target: Path) -> None:
        """Nothing to prepare: the target database exists."""

    def propose(self, *, cursor: int, planner_state: Mapping[str, Any], observation: Any, put_blob: Any) -> Proposal:
        if cursor >= len(self._orders):
            return Done(reason=f"all {len(self._orders)} orders recorded")
        line = self._orders[cursor]
        return Action(kind="record_order", risk=Risk(line.risk), params={
            "order_id": line.order_id, "key": line.order_id, "customer": line.customer, "card": {"$secret": line.card},
            "amount_cents": line.amount_cents})
