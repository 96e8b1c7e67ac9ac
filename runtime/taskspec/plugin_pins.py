"""Pinning the plug-ins a run was created with, and checking them on resume (DESIGN.md section 5.10).

When a run is created, the identity of its planner, adapter and verifier plug-ins -- the entry
(``module:Attr``), the distribution that provided it and its version -- is stored with the run.
On every resume the task spec's plug-ins are found again and compared: a different distribution,
version or entry refuses the resume with :class:`PluginVersionMismatchError` before anything is
proposed or executed, because another planner version may propose something else for the same
committed state. Each identity also carries ``code_digest``, the sha256 of the source file of
the entry's module as this process finds it: a deploy that changes a plug-in's code without
changing its version (a script on ``sys.path``, an editable install) is refused with
:class:`CodeDigestMismatchError` (DESIGN.md section 8.4). Runs pinned before code digests were
kept compare the other fields only. Framework-free: imports nothing from Django.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime.errors import CodeClosureMismatchError, CodeDigestMismatchError, PluginVersionMismatchError
from runtime.plugins.registry import ADAPTERS, PLANNERS, VERIFIERS, plugin_load
from runtime.taskspec import TaskSpec
from runtime.taskspec.code_closure import code_closure_digest

_DIGESTS = ("code_digest", "closure_digest")


def plugin_pins(spec: TaskSpec) -> dict[str, dict[str, str | None]]:
    """``{"planner": identity, "adapter": identity, "verifier": identity}`` for ``spec``.

    Each identity is ``{"name", "entry", "distribution", "version"}``
    (:meth:`runtime.plugins.registry.PluginIdentity.as_json`) plus ``code_digest``
    (:func:`plugin_code_digest`) and ``closure_digest``, the code the entry module imports
    (:func:`runtime.taskspec.code_closure.code_closure_digest`).

    Raises:
        PluginNotFoundError / PluginLoadError: a plug-in is not installed or cannot be imported.
    """
    env = spec.environment
    found = {
        "planner": plugin_load(group=PLANNERS, name=spec.planner.kind, entry=spec.planner.entry),
        "adapter": plugin_load(group=ADAPTERS, name=env.adapter, entry=env.entry),
        "verifier": plugin_load(group=VERIFIERS, name=spec.verifier.kind, entry=spec.verifier.entry),
    }
    return {role: {**loaded.identity.as_json(), "code_digest": plugin_code_digest(loaded.identity.entry),
                   "closure_digest": code_closure_digest(loaded.identity.entry)}
            for role, loaded in found.items()}


def plugin_code_digest(entry: str) -> str | None:
    """``"sha256:<hex>"`` of the source file of ``entry``'s module (``"module:Attr"``), as read now.

    Read from disk on every call, so a file changed under a running process is seen too. None when
    the module has no source file (a built-in or a frozen module).
    """
    module = importlib.import_module(entry.partition(":")[0])
    source = getattr(module, "__file__", None)
    if not source or not Path(source).is_file():
        return None
    return "sha256:" + hashlib.sha256(Path(source).read_bytes()).hexdigest()


def plugin_pins_check(*, run_id: str, pinned: Mapping[str, Any] | None, spec: TaskSpec) -> None:
    """Refuse a resume whose plug-ins are not the pinned ones.

    Args:
        run_id: for the error.
        pinned: what :func:`plugin_pins` returned at run creation (None for runs created before
            plug-ins were pinned: nothing to compare).
        spec: the run's stored task spec.

    Raises:
        PluginVersionMismatchError: naming the role, the pinned and the installed identity.
        CodeDigestMismatchError: same entry, distribution and version, but the module's source
            differs from the pinned code digest (DESIGN.md section 8.4).
        CodeClosureMismatchError: the entry module is the pinned one but a module it imports
            changed (runs pinned before closures were kept skip this check).
    """
    if not pinned:
        return
    now = plugin_pins(spec)
    for role, full in sorted(now.items()):
        was_pin = dict(pinned.get(role) or {})
        identity = {k: v for k, v in full.items() if k not in _DIGESTS}
        same_identity = {k: v for k, v in was_pin.items() if k not in _DIGESTS} == identity
        if same_identity and was_pin.get("closure_digest") and full["code_digest"] == was_pin.get("code_digest") \
                and was_pin["closure_digest"] != full["closure_digest"]:
            raise CodeClosureMismatchError(
                f"the {role} plug-in {identity['entry']} imports code that changed since the run was pinned "
                f"(closure digest {str(full['closure_digest'])[:19]}, pinned {str(was_pin['closure_digest'])[:19]})",
                run_id=run_id, role=role)
        if "code_digest" in was_pin and same_identity and was_pin["code_digest"] != full["code_digest"]:
            raise CodeDigestMismatchError(
                f"the {role} plug-in {identity['entry']} runs other code than the run was pinned to "
                f"(code digest {str(full['code_digest'])[:19]}, pinned {str(was_pin['code_digest'])[:19]})",
                run_id=run_id, role=role)
        if not same_identity:
            was = pinned.get(role) or {}
            raise PluginVersionMismatchError(
                f"the {role} plug-in {identity['name']!r} is now {identity['entry']} from "
                f"{identity['distribution']} {identity['version']}; the run was created with "
                f"{was.get('entry')} from {was.get('distribution')} {was.get('version')}",
                run_id=run_id, role=role,
            )
