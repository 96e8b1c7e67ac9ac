"""A planner with memory: it writes ``notes`` notes and carries how many it wrote in its state."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.checkpoint import Action
from runtime.errors import PlannerStateError
from runtime.planners.base import Done, PlannerStep


class NoteTaker:
    """``[planner] kind = "note-taker"``: one ``put`` action per note, then done."""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        notes: int = Field(ge=1, le=1000)
        prefix: str = Field(default="note", pattern=r"^[a-z][a-z0-9-]{0,40}$")

    def __init__(self, *, options: Options, context: Any) -> None:
        self.options = options

    def init_state(self) -> dict[str, Any]:
        return {"written": 0}

    def prepare_environment(self, target: Any) -> None:
        """Nothing to prepare: the store creates itself."""

    def propose(self, *, cursor: int, planner_state: dict[str, Any], observation: Any,
                put_blob: Any) -> PlannerStep:
        # Decides from its own state only: the same committed state gives the same proposal.
        written = planner_state.get("written")
        if not isinstance(written, int) or written < 0:
            raise PlannerStateError("note-taker state has no counter")
        if written >= self.options.notes:
            return PlannerStep(Done(reason=f"wrote {written} notes"), planner_state)
        n = written + 1
        action = Action(kind="put", target=f"{self.options.prefix}-{n}",
                        params={"value": f"note {n} of {self.options.notes}"})
        return PlannerStep(action, {"written": n})
