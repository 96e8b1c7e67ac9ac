"""The adapter actions a planner offers to someone else, checked against the policy when a run is created.

DESIGN.md sections 5.12 and 6.7. Two planners do not choose actions themselves but offer the
adapter's actions: the chat-tools planner offers them to a model as tools, the external planner
to an agent through the gateway. Such a planner says so with ``offers_adapter_actions = True``
on its class. What it offers is the adapter's actions that the policy's ``allowed_actions``
lists (the policy gate refuses every other kind anyway); when that is none, the run can never
act and every later step or gateway call fails. :func:`offered_actions_check` refuses such a
task spec before the run exists, naming the actions the adapter offers.

An adapter's actions: the file actions of ``workspace`` and ``git`` (:data:`FILE_ADAPTER_ACTIONS`),
or the kinds a plug-in declares with ``action_models(options=...)`` (the HTTP adapter's
``http_request``, one per SQL template). Framework-free: nothing here imports Django.
"""

from __future__ import annotations

from pydantic import BaseModel

from runtime.errors import PolicyActionsError
from runtime.plugins.registry import LoadedPlugin
from runtime.plugins.validation_errors import render_lines
from runtime.taskspec.models import TaskSpec, spec_plugin

FILE_ADAPTER_ACTIONS: dict[str, tuple[str, ...]] = {"workspace": ("write_file", "delete_file"),
                                                    "git": ("write_file", "delete_file")}
"""The actions the built-in file adapters accept from a planner that offers them
(``runtime/adapters/actions.py``; the git adapter's ``commit`` is the git-history planner's own)."""


def adapter_actions(*, name: str, adapter: LoadedPlugin, options: BaseModel) -> tuple[str, ...]:
    """The action kinds adapter ``name`` accepts from a planner that offers them, in order.

    Args:
        name: the spec's ``environment.adapter`` (``"workspace"``, ``"http"``, ``"python"``...).
        adapter: the loaded adapter plug-in.
        options: its validated options (a declaring adapter's actions depend on them).

    Returns:
        The kinds; empty when the adapter declares none.
    """
    if name in FILE_ADAPTER_ACTIONS:
        return FILE_ADAPTER_ACTIONS[name]
    models_of = getattr(adapter.factory, "action_models", None)
    if not callable(models_of):
        return ()
    return tuple(sorted(models_of(options=options)))


def offered_actions_check(spec: TaskSpec, *, source: str, file: str | None = None) -> None:
    """Refuse a spec whose planner offers the adapter's actions while the policy allows none of them.

    Args:
        spec: a validated task spec.
        source: what is checked, for the message (``"task spec external.toml"``).
        file: the file name, kept in the error's context.

    Raises:
        PolicyActionsError: the planner offers adapter actions and ``policy.allowed_actions``
            names none of the adapter's actions (the message lists the ones it offers).
        PluginNotFoundError / PluginLoadError / TaskSpecError: as :func:`spec_plugin`.
    """
    planner, _ = spec_plugin(spec, "planner")
    if not getattr(planner.factory, "offers_adapter_actions", False):
        return
    adapter, options = spec_plugin(spec, "environment")
    name = spec.environment.adapter
    offered = adapter_actions(name=name, adapter=adapter, options=options)
    if any(kind in spec.policy.allowed_actions for kind in offered):
        return
    listed = ", ".join(spec.policy.allowed_actions) or "nothing"
    planner_name = repr(spec.planner.entry or spec.planner.kind)
    if offered:
        line = (f"policy.allowed_actions: lists {listed}, none of the actions adapter {name!r} offers the "
                f"{planner_name} planner ({', '.join(offered)}); allow at least one of them")
    else:
        line = (f"environment.adapter: adapter {name!r} declares no actions (action_models) the "
                f"{planner_name} planner could offer; use an adapter that declares its actions")
    raise PolicyActionsError(render_lines(source, [line]), file=file, adapter=name,
                             offered=", ".join(offered) or "none")
