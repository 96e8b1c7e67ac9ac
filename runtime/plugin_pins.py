"""Pinning the plug-ins a run was created with, and checking them on resume (DESIGN.md section 5.10).

When a run is created, the identity of its planner, adapter and verifier plug-ins -- the entry
(``module:Attr``), the distribution that provided it and its version -- is stored with the run.
On every resume the task spec's plug-ins are found again and compared: a different distribution,
version or entry refuses the resume with :class:`PluginVersionMismatchError` before anything is
proposed or executed, because another planner version may propose something else for the same
committed state. Framework-free: imports nothing from Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.errors import PluginVersionMismatchError
from runtime.plugins import ADAPTERS, PLANNERS, VERIFIERS, plugin_load
from runtime.taskspec import TaskSpec


def plugin_pins(spec: TaskSpec) -> dict[str, dict[str, str | None]]:
    """``{"planner": identity, "adapter": identity, "verifier": identity}`` for ``spec``.

    Each identity is ``{"name", "entry", "distribution", "version"}``
    (:meth:`runtime.plugins.PluginIdentity.as_json`).

    Raises:
        PluginNotFoundError / PluginLoadError: a plug-in is not installed or cannot be imported.
    """
    env = spec.environment
    found = {
        "planner": plugin_load(group=PLANNERS, name=spec.planner.kind, entry=spec.planner.entry),
        "adapter": plugin_load(group=ADAPTERS, name=env.adapter, entry=env.entry),
        "verifier": plugin_load(group=VERIFIERS, name=spec.verifier.kind, entry=spec.verifier.entry),
    }
    return {role: loaded.identity.as_json() for role, loaded in found.items()}


def plugin_pins_check(*, run_id: str, pinned: Mapping[str, Any] | None, spec: TaskSpec) -> None:
    """Refuse a resume whose plug-ins are not the pinned ones.

    Args:
        run_id: for the error.
        pinned: what :func:`plugin_pins` returned at run creation (None for runs created before
            plug-ins were pinned: nothing to compare).
        spec: the run's stored task spec.

    Raises:
        PluginVersionMismatchError: naming the role, the pinned and the installed identity.
    """
    if not pinned:
        return
    now = plugin_pins(spec)
    for role, identity in sorted(now.items()):
        if dict(pinned.get(role) or {}) != identity:
            was = pinned.get(role) or {}
            raise PluginVersionMismatchError(
                f"the {role} plug-in {identity['name']!r} is now {identity['entry']} from "
                f"{identity['distribution']} {identity['version']}; the run was created with "
                f"{was.get('entry')} from {was.get('distribution')} {was.get('version')}",
                run_id=run_id, role=role,
            )
