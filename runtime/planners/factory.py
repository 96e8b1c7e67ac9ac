"""Build the planner a task spec names, through the plug-in registry (DESIGN.md section 5.10).

Every planner -- Ratchet's own and a third party's -- is a plug-in of the ``ratchet.planners``
entry-point group (or a dotted path with ``kind = "python"``). This module also holds the
built-in git-history planner's plug-in factory, so the planner module itself keeps its plain
constructor. Kept apart from :mod:`runtime.planners.base` so the protocol module never imports
the planners that implement it. Framework-free: nothing here imports Django.
"""

from __future__ import annotations

from pathlib import Path

from runtime.planners.base import Planner, PlannerContext
from runtime.planners.git_history.planner import GitHistoryPlanner
from runtime.plugins.registry import plugin
from runtime.taskspec import GitHistoryPlannerSpec, TaskSpec, spec_plugin


def build_planner(spec: TaskSpec, *, base_dir: Path | None = None) -> Planner:
    """The planner named by ``spec.planner``, constructed with its validated options.

    Args:
        spec: a validated task spec.
        base_dir: directory that relative paths in ``spec`` are resolved against (specs loaded by
            ``load_task_spec`` already hold absolute paths; this matters for hand-built specs).

    Raises:
        PluginNotFoundError / PluginLoadError: the planner is not installed or cannot be imported.
        PluginConstructionError: the planner raised while being constructed.
        TaskSpecError: its options no longer validate.
    """
    loaded, options = spec_plugin(spec, "planner")
    context = PlannerContext(base_dir=base_dir, target=spec.resolve_target(base_dir),
                             setup=spec.environment.setup, adapter=spec.environment.adapter,
                             adapter_entry=spec.environment.entry, adapter_options=dict(spec.environment.options),
                             allowed_actions=tuple(spec.policy.allowed_actions))
    planner: Planner = loaded.build(options=options, context=context)
    return planner


@plugin(options=GitHistoryPlannerSpec)
def git_history(*, options: GitHistoryPlannerSpec, context: PlannerContext) -> GitHistoryPlanner:
    """The ``git-history`` planner plug-in: replays ``options.range`` of ``options.source``.

    A relative ``source`` resolves against ``context.base_dir``.
    """
    source = Path(options.source)
    if not source.is_absolute() and context.base_dir is not None:
        source = Path(context.base_dir) / source
    return GitHistoryPlanner(source=source, range=options.range, risk=options.risk, setup=context.setup)
