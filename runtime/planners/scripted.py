"""The scripted planner: the spec's ``[[planner.steps]]``, proposed in order.

Step ``i`` is proposed at cursor ``i``; past the last step the planner is :class:`Done`. Content is
UTF-8 text from the spec, stored through ``put_blob`` so the action carries only its digest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.core.canonical import canonical_json, digest_bytes
from runtime.core.checkpoint import Action, Risk
from runtime.errors import PlannerStateError
from runtime.planners.base import Done, PlannerState, Proposal, PutBlob, check_cursor

if TYPE_CHECKING:
    from runtime.adapters.base import Observation
    from runtime.taskspec import ScriptedStep


class ScriptedPlanner:
    """Proposes fixed steps in order (see :mod:`runtime.planners.scripted`).

    Args:
        steps: validated ``ScriptedStep`` entries from the task spec.
    """

    kind = "scripted"

    def __init__(self, steps: Sequence[ScriptedStep]) -> None:
        self._steps = tuple(steps)
        # Pinned in the planner state so a resume under an edited step list is caught here too,
        # not only by the scenario fingerprint.
        self._steps_digest = digest_bytes(
            canonical_json([s.model_dump(mode="json") for s in self._steps])
        )

    def init_state(self) -> PlannerState:
        """``{"kind": "scripted", "steps": <count>, "steps_digest": <digest of the steps>}``."""
        return {"kind": self.kind, "steps": len(self._steps), "steps_digest": self._steps_digest}

    def prepare_environment(self, target: Path) -> None:
        """Nothing to prepare: the workspace adapter owns its target directory."""

    def propose(
        self,
        *,
        cursor: int,
        planner_state: Mapping[str, Any],
        observation: Observation,
        put_blob: PutBlob,
    ) -> Proposal:
        """The step at ``cursor`` as a ``write_file`` or ``delete_file`` action, or Done.

        Raises:
            PlannerStateError: ``planner_state`` was made for another step list.
            PlannerError: ``cursor`` is negative or not an int.
        """
        check_cursor(cursor)
        if (
            planner_state.get("kind") != self.kind
            or planner_state.get("steps_digest") != self._steps_digest
        ):
            raise PlannerStateError("planner state was not made for this scripted step list")
        if cursor >= len(self._steps):
            return Done(reason=f"all {len(self._steps)} scripted steps proposed")
        step = self._steps[cursor]
        if step.kind == "delete_file":
            return Action(kind="delete_file", target=step.target, params={}, risk=Risk(step.risk))
        content = (step.content or "").encode("utf-8")
        return Action(
            kind="write_file",
            target=step.target,
            params={"content": put_blob(content), "executable": step.executable},
            risk=Risk(step.risk),
        )
