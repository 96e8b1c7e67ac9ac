"""A planner's actions known from its options, checked against the adapter's declared actions.

DESIGN.md section 5.10. Some planners know actions before the run starts: the scripted
planner's generic steps (``[[planner.steps]] action = "http_request"``) carry the action's
target and params verbatim. Such a planner declares ``planned_actions(options)``; an adapter
that knows what its actions look like declares ``action_models(options)``, one pydantic model
per action kind validating ``{"target", "params"}`` (its JSON schema is the action's schema).
When a task spec is loaded, every planned action is validated by its adapter's model, so a step
the adapter could never execute is a task spec error naming its TOML path
(``planner.steps[1].params.method: Input should be 'POST'``), not a frozen run later.

Both declarations are optional: an adapter that declares nothing (``workspace``, ``git``) accepts
the planner's file steps unchecked, as before, and refuses generic steps, which have no schema to
be checked against. Whether an action is *allowed* (hosts, paths, the policy) stays with the
policy gate and the adapter at run time. Framework-free: nothing here imports Django.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from runtime.plugins.registry import LoadedPlugin
from runtime.plugins.validation_errors import error_lines


@dataclass(frozen=True)
class PlannedAction:
    """One action a planner will propose, as its options fix it.

    Attributes:
        loc: the TOML path of its table below the planner's, e.g. ``("steps", 2)``.
        kind: the action kind (``"http_request"``, ``"write_file"``).
        target: the action's target.
        params: the action's params verbatim, or None when the planner builds them only when it
            proposes (file content goes to a blob first), so only the kind can be checked.
    """

    loc: tuple[str | int, ...]
    kind: str
    target: str
    params: Mapping[str, Any] | None


ActionModels = Callable[..., Mapping[str, type[BaseModel]]]
"""An adapter plug-in's ``action_models(options=...)``: ``kind -> model of {"target", "params"}``."""


def planned_action_lines(*, planner: LoadedPlugin, planner_options: BaseModel, adapter: LoadedPlugin,
                         adapter_options: BaseModel) -> list[str]:
    """One ``"<toml.path>: <problem>"`` line per planned action the adapter's schema refuses.

    Args:
        planner, planner_options: the planner plug-in and its validated options.
        adapter, adapter_options: the adapter plug-in and its validated options.

    Returns:
        An empty list when every planned action fits (or nothing is declared to check).
    """
    planned_of = getattr(planner.factory, "planned_actions", None)
    if not callable(planned_of):
        return []
    planned: list[PlannedAction] = list(planned_of(planner_options))
    models_of: ActionModels | None = getattr(adapter.factory, "action_models", None)
    name = adapter.identity.name
    if not callable(models_of):
        return [f"{_path(p.loc)}: adapter {name!r} declares no action schemas, so a generic step "
                f"({p.kind}) cannot be checked; use an adapter that declares its actions"
                for p in planned if p.params is not None]
    models = models_of(options=adapter_options)
    lines: list[str] = []
    for p in planned:
        model = models.get(p.kind)
        if model is None:
            lines.append(f"{_path(p.loc)}: adapter {name!r} has no {p.kind!r} action; it declares "
                         f"{', '.join(sorted(models)) or 'none'}")
            continue
        if p.params is None:
            continue
        try:
            model.model_validate({"target": p.target, "params": dict(p.params)})
        except ValidationError as exc:
            # error_lines renders int parts as [i], as pydantic's own locations
            lines.extend(error_lines(exc, prefix=("planner", *p.loc)))  # type: ignore[arg-type]
    return lines


def _path(loc: tuple[str | int, ...]) -> str:
    out = "planner"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
