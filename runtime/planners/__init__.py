"""Planners: deterministic code that proposes the next write of a run (see :mod:`.base`).

Shipped planners: :class:`ScriptedPlanner` (fixed steps from the task spec) and
:class:`GitHistoryPlanner` (replays a commit range of a git repository). Framework-free.
"""

from runtime.planners.base import Done, Planner, PlannerState, Proposal, PutBlob, build_planner
from runtime.planners.git_history import GitHistoryPlanner, prepare_target
from runtime.planners.scripted import ScriptedPlanner

__all__ = (
    "Done",
    "GitHistoryPlanner",
    "Planner",
    "PlannerState",
    "Proposal",
    "PutBlob",
    "ScriptedPlanner",
    "build_planner",
    "prepare_target",
)
