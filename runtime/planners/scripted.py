"""The scripted planner: the spec's ``[[planner.steps]]``, proposed in order.

Step ``i`` is proposed at cursor ``i``; past the last step the planner is :class:`Done`. A file
step's content is UTF-8 text from the spec, stored through ``put_blob`` so the action carries only
its digest. A generic step (``action = "http_request"`` with ``target`` and ``params``) is
proposed as exactly that action; the task spec checked it against the adapter's declared action
schema when it was loaded (:meth:`ScriptedPlanner.planned_actions`, DESIGN.md section 5.10).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.core.canonical import canonical_json, digest_bytes
from runtime.core.checkpoint import Action, Risk
from runtime.errors import PlannerStateError
from runtime.planners.base import Done, PlannerContext, PlannerState, Proposal, PutBlob, check_cursor
from runtime.taskspec import ScriptedPlannerSpec
from runtime.taskspec.planned_actions import PlannedAction

if TYPE_CHECKING:
    from runtime.adapters.base import Observation


class ScriptedPlanner:
    """Proposes fixed steps in order (see :mod:`runtime.planners.scripted`).

    A planner plug-in (entry point ``scripted`` in the ``ratchet.planners`` group, DESIGN.md
    section 5.10); it keeps no moving state, so :meth:`propose` returns the bare proposal.

    Args:
        options: the validated ``[planner]`` table: its ``steps``.
        context: unused (the steps carry everything).
    """

    kind = "scripted"
    proposes_at_once = True
    """Proposes from its state and the observation alone, at once and without side effects, so
    the engine asks for the next write while it settles the last one and commits both in one
    checkpoint (DESIGN.md section 4.13)."""
    Options = ScriptedPlannerSpec

    def __init__(self, *, options: ScriptedPlannerSpec, context: PlannerContext | None = None) -> None:
        self._steps = tuple(options.steps)
        # Pinned in the planner state so a resume under an edited step list is caught here too,
        # not only by the scenario fingerprint.
        self._steps_digest = digest_bytes(
            canonical_json([s.model_dump(mode="json") for s in self._steps])
        )

    @staticmethod
    def planned_actions(options: ScriptedPlannerSpec) -> list[PlannedAction]:
        """Every step as the action it proposes, for the task spec's check against the adapter.

        A generic step's params are fixed by the spec and checked in full; a file step's are
        built when it is proposed (its content goes to a blob), so only its kind is checked.
        """
        planned = []
        for i, step in enumerate(options.steps):
            if step.kind == "action" and step.action is not None:
                planned.append(PlannedAction(loc=("steps", i), kind=step.action, target=step.target,
                                             params=step.params or {}))
            else:
                planned.append(PlannedAction(loc=("steps", i), kind=step.kind, target=step.target, params=None))
        return planned

    def init_state(self) -> PlannerState:
        """``{"kind": "scripted", "steps": <count>, "steps_digest": <digest of the steps>}``."""
        return {"kind": self.kind, "steps": len(self._steps), "steps_digest": self._steps_digest}

    def prepare_environment(self, target: Path) -> None:
        """Nothing to prepare: the adapter owns its environment."""

    def propose(
        self,
        *,
        cursor: int,
        planner_state: Mapping[str, Any],
        observation: Observation,
        put_blob: PutBlob,
    ) -> Proposal:
        """The step at ``cursor`` as its action (``write_file``, ``delete_file``, or a generic
        step's own), or Done.

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
        if step.kind == "action" and step.action is not None:
            return Action(kind=step.action, target=step.target, params=dict(step.params or {}),
                          risk=Risk(step.risk))
        if step.kind == "delete_file":
            return Action(kind="delete_file", target=step.target, params={}, risk=Risk(step.risk))
        content = (step.content or "").encode("utf-8")
        return Action(
            kind="write_file",
            target=step.target,
            params={"content": put_blob(content), "executable": step.executable},
            risk=Risk(step.risk),
        )
