"""The planner protocol (issue "exactly-once actions", part 2).

A planner is deterministic code that decides the next write: given the plan cursor, the small
JSON state it keeps in the checkpoint and the latest observation, it returns one
:class:`~runtime.core.checkpoint.Action` or :class:`Done`. Permissions, amounts and deletions are
decided here, never by a model. The same ``cursor`` and ``planner_state`` must give the same
action -- the same intent digest -- in any process, because the engine derives the idempotency
key before the write and compares intents after a crash (DESIGN.md section 5).

Framework-free: nothing here imports Django.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from pydantic import JsonValue

from runtime.core.checkpoint import Action
from runtime.errors import PlannerError

if TYPE_CHECKING:  # the adapter contract lives with the adapters; planners only read from it
    from runtime.adapters.base import Observation
    from runtime.taskspec import TaskSpec


@dataclass(frozen=True)
class Done:
    """The plan is finished; ``reason`` is shown to operators and written to the trace."""

    reason: str


Proposal: TypeAlias = Action | Done
"""What :meth:`Planner.propose` returns."""

PutBlob: TypeAlias = Callable[[bytes], str]
"""Stores bytes content-addressed and returns their ``"sha256:<hex>"`` digest."""

PlannerState: TypeAlias = dict[str, JsonValue]


@runtime_checkable
class Planner(Protocol):
    """What the step engine needs of a planner."""

    def init_state(self) -> PlannerState:
        """Called once when the run is created; the result is kept in every checkpoint.

        Anything the plan depends on that could move later (a branch HEAD, a file list) is
        resolved here and pinned, so a resume does not depend on it. Keep it small (kilobytes).
        """
        ...

    def prepare_environment(self, target: Path) -> None:
        """Called once at run creation, before the first observation: create what the spec's
        ``environment.setup`` asks for (a clone at the replay base), or do nothing."""
        ...

    def propose(
        self,
        *,
        cursor: int,
        planner_state: Mapping[str, Any],
        observation: Observation,
        put_blob: PutBlob,
    ) -> Proposal:
        """Propose the write at ``cursor`` (0-based index of the next write), or :class:`Done`.

        Args:
            cursor: index of the next write; the engine advances it after each committed write.
            planner_state: the JSON returned by :meth:`init_state`, as stored in the checkpoint.
            observation: the adapter's latest observation of the environment.
            put_blob: stores file content; the returned digest goes into the action's params.

        Raises:
            PlannerStateError: ``planner_state`` was not made by this planner.
            PlannerError: the next action cannot be computed.
        """
        ...


def check_cursor(cursor: int) -> int:
    """Return ``cursor`` if it is a non-negative int.

    Raises:
        PlannerError: otherwise (a bool or negative value means a corrupted engine state).
    """
    if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
        raise PlannerError(f"plan cursor must be a non-negative integer, got {cursor!r:.40}")
    return cursor


def build_planner(spec: TaskSpec, *, base_dir: Path | None = None) -> Planner:
    """The planner named by ``spec.planner``.

    Args:
        spec: a validated task spec.
        base_dir: directory that relative paths in ``spec`` are resolved against (specs loaded by
            ``load_task_spec`` already hold absolute paths; this matters for hand-built specs).

    Raises:
        PlannerError: the planner kind is unknown to this code.
    """
    from runtime.planners.git_history import GitHistoryPlanner
    from runtime.planners.scripted import ScriptedPlanner
    from runtime.taskspec import GitHistoryPlannerSpec, ScriptedPlannerSpec

    planner = spec.planner
    if isinstance(planner, ScriptedPlannerSpec):
        return ScriptedPlanner(planner.steps)
    if isinstance(planner, GitHistoryPlannerSpec):
        source = Path(planner.source)
        if not source.is_absolute() and base_dir is not None:
            source = Path(base_dir) / source
        return GitHistoryPlanner(
            source=source, range=planner.range, risk=planner.risk, setup=spec.environment.setup
        )
    raise PlannerError(f"unknown planner kind {getattr(planner, 'kind', None)!r}")
