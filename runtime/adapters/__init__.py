"""Environment adapters: the only way a run touches the outside world (DESIGN.md section 5).

Curated public surface:

* :class:`Adapter`, :class:`Observation`, :data:`BlobSource` -- the protocol the step engine uses;
* :class:`WorkspaceAdapter` -- a directory, receipts in an adapter-owned journal;
* :class:`GitAdapter` -- a repository, receipts are commits carrying trailers;
* :func:`open_adapter` -- build one by kind.

Framework-free: nothing here imports Django.
"""

from __future__ import annotations

from pathlib import Path

from runtime.adapters.base import Adapter, BlobSource, Observation
from runtime.adapters.git import GitAdapter
from runtime.adapters.workspace import WorkspaceAdapter
from runtime.errors import AdapterTargetError, UnknownAdapterError

ADAPTER_KINDS: dict[str, type[WorkspaceAdapter] | type[GitAdapter]] = {
    WorkspaceAdapter.kind: WorkspaceAdapter,
    GitAdapter.kind: GitAdapter,
}


def open_adapter(kind: str, target: str | Path) -> Adapter:
    """Open the adapter of ``kind`` on ``target``.

    Args:
        kind: ``"workspace"`` (a directory) or ``"git"`` (the top of a non-bare repository).
        target: filesystem path of the environment.

    Raises:
        UnknownAdapterError: ``kind`` is not one of :data:`ADAPTER_KINDS`.
        AdapterTargetError: ``target`` is empty or not a usable environment of that kind.
    """
    cls = ADAPTER_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise UnknownAdapterError(kind=repr(kind)[:40])
    if not isinstance(target, str | Path) or not str(target):
        raise AdapterTargetError("adapter target must be a non-empty path", kind=kind)
    return cls(target)


__all__ = [
    "ADAPTER_KINDS",
    "Adapter",
    "BlobSource",
    "GitAdapter",
    "Observation",
    "WorkspaceAdapter",
    "open_adapter",
]
