"""Planner plug-ins that misbehave on purpose, named by dotted path (``kind = "python"``).

They live in the test tree, not in an installed distribution, so the registry reports no
distribution for them; each fails one way the plug-in contract names (DESIGN.md section 5.10).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from runtime.core.checkpoint import Action
from runtime.planners.base import MAX_PLANNER_STATE_BYTES, PlannerStep


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    notes: int = 3


class _Base:
    Options = _Options

    def __init__(self, *, options: _Options, context: Any) -> None:
        self.options = options

    def init_state(self) -> dict[str, Any]:
        return {"written": 0}

    def prepare_environment(self, target: Any) -> None:
        """Nothing to prepare."""


class RaisesWhileProposing(_Base):
    """Proposes one note, then raises on the second proposal."""

    def propose(self, *, cursor: int, planner_state: dict[str, Any], observation: Any, put_blob: Any) -> Any:
        if planner_state["written"] >= 1:
            raise RuntimeError("the model went away")
        return PlannerStep(Action(kind="put", target="note-1", params={"value": "one"}), {"written": 1})


class RaisesWhileConstructing(_Base):
    """Refuses to be built."""

    def __init__(self, *, options: _Options, context: Any) -> None:
        raise ValueError("no API key configured")


class OutgrowsItsState(_Base):
    """Returns a state larger than a checkpoint may hold, with its first proposal."""

    def propose(self, *, cursor: int, planner_state: dict[str, Any], observation: Any, put_blob: Any) -> Any:
        return PlannerStep(Action(kind="put", target="note-1", params={"value": "one"}),
                           {"context": "x" * (MAX_PLANNER_STATE_BYTES + 1)})


class KeepsContextInAttachments(_Base):
    """Keeps a large context out of its state: stores it with put_blob and keeps the digest."""

    def propose(self, *, cursor: int, planner_state: dict[str, Any], observation: Any, put_blob: Any) -> Any:
        written = planner_state["written"]
        if written >= 1:
            from runtime.planners.base import Done

            return PlannerStep(Done(reason="one note"), planner_state)
        context = put_blob(b"x" * (MAX_PLANNER_STATE_BYTES * 2))
        return PlannerStep(Action(kind="put", target="note-1", params={"value": "one"}),
                           {"written": 1, "context": context})


class NotAPlugin:
    """Has no Options model."""


class _LenientOptions(BaseModel):
    """An options model as a newcomer writes it: pydantic's default would ignore unknown fields."""

    notes: int = 3


class LenientOptions(_Base):
    """A planner whose options model does not forbid extra fields (the registry must)."""

    Options = _LenientOptions

    def propose(self, *, cursor: int, planner_state: dict[str, Any], observation: Any, put_blob: Any) -> Any:
        raise RuntimeError("not driven in these tests")
