"""Open an environment adapter by name, through the plug-in registry (DESIGN.md sections 5.5, 5.10).

Every adapter -- the built-in ``workspace`` and ``git`` ones and a third party's -- is a plug-in
of the ``ratchet.adapters`` entry-point group (or a dotted path with ``adapter = "python"``).
This module holds the built-in adapters' plug-in factories, so the adapter modules keep their
plain constructors. Kept apart from the protocol in :mod:`runtime.adapters.base` so that module
never imports the adapters that implement it. Framework-free: nothing here imports Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runtime.adapters.base import Adapter, AdapterContext
from runtime.adapters.git.adapter import GitAdapter
from runtime.adapters.workspace.adapter import WorkspaceAdapter
from runtime.errors import (
    AdapterError,
    AdapterTargetError,
    PluginConstructionError,
    PluginNotFoundError,
    TaskSpecError,
    UnknownAdapterError,
)
from runtime.plugins.options import NoOptions
from runtime.plugins.registry import ADAPTERS, plugin, plugin_load
from runtime.plugins.validation_errors import error_lines, render_lines


@plugin(options=NoOptions)
def workspace(*, options: NoOptions, context: AdapterContext) -> WorkspaceAdapter:
    """The ``workspace`` adapter plug-in: a directory, receipts in an adapter-owned journal."""
    return WorkspaceAdapter(context.target)


@plugin(options=NoOptions)
def git(*, options: NoOptions, context: AdapterContext) -> GitAdapter:
    """The ``git`` adapter plug-in: a repository, receipts are commits carrying trailers."""
    return GitAdapter(context.target)


def open_adapter(kind: str, target: str | Path, *, entry: str | None = None,
                 options: Mapping[str, Any] | None = None) -> Adapter:
    """Open the adapter plug-in ``kind`` on ``target``.

    Args:
        kind: a name registered in ``ratchet.adapters`` (``"workspace"``: a directory, ``"git"``:
            the top of a non-bare repository, or a third party's), or ``"python"`` with ``entry``.
        target: filesystem path of the environment (or whatever the adapter takes it to mean).
        entry: ``"module:Attr"`` with ``kind = "python"``.
        options: the spec's ``[environment.options]``, validated by the adapter's options model.

    Raises:
        UnknownAdapterError: no adapter of that name is installed.
        PluginLoadError: the adapter's code cannot be imported.
        TaskSpecError: ``options`` do not validate (each field named as ``environment.options.*``).
        AdapterTargetError: ``target`` is empty or not a usable environment of that kind.
        PluginConstructionError: a third-party adapter raised while being constructed.
    """
    if not isinstance(kind, str) or not kind:
        raise UnknownAdapterError(kind=repr(kind)[:40])
    try:
        loaded = plugin_load(group=ADAPTERS, name=kind, entry=entry)
    except PluginNotFoundError as exc:
        raise UnknownAdapterError(exc.message, kind=kind[:80]) from None
    if not isinstance(target, str | Path) or not str(target):
        raise AdapterTargetError("adapter target must be a non-empty path", kind=kind)
    try:
        validated = loaded.options(options or {})
    except ValidationError as exc:
        raise TaskSpecError(render_lines(f"adapter {kind!r} options",
                                         error_lines(exc, prefix=("environment", "options")))) from None
    try:
        adapter: Adapter = loaded.build(options=validated, context=AdapterContext(target=Path(target)))
    except PluginConstructionError as exc:
        if isinstance(exc.__cause__, AdapterError):
            raise exc.__cause__ from None  # an adapter's own typed refusal keeps its type
        raise
    return adapter
