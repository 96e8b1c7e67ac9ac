"""Planners: deterministic code that proposes the next write of a run.

A package marker only; import from the modules themselves:

* :mod:`runtime.planners.base` -- the planner protocol (``Planner``, ``Done``, ``PlannerStep``,
  ``PlannerContext``; the bounded, moving planner state);
* :mod:`runtime.planners.scripted` -- ``ScriptedPlanner``: fixed steps from the task spec;
* :mod:`runtime.planners.git_history` -- ``GitHistoryPlanner``: replays a commit range (a folder);
* :mod:`runtime.planners.factory` -- ``build_planner``: the planner a task spec names, through
  the plug-in registry (:mod:`runtime.plugins.registry`, DESIGN.md section 5.10);
* :mod:`runtime.planners.chat_tools` -- ``ChatToolsPlanner``: a model proposes each write through
  tool calls (DESIGN.md section 6.7), one folder of its own;
* :mod:`runtime.planners.external` -- ``ExternalPlanner``: runs driven through the agent gateway.

Framework-free: nothing here imports Django. The chat-tools planner reads recorded replies and
appends its events through callables the engine binds (``bind_run``), not through the stores.
"""
