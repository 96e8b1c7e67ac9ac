"""Read back what a receipt's write left in its environment, adapter-neutrally (DESIGN.md section 6.6).

A reviewer judging a receipt conflict needs the content behind both sides: what the pending
intent plans and what the conflicting write landed. The dashboard asks :func:`landed_effect`,
which picks the reader of the environment's adapter kind and answers in the adapter-neutral types
of :mod:`runtime.adapters.landed`. An adapter without a reader (HTTP, SQL, a third party's)
answers None, and the page shows the planned parameters beside the receipt's result instead.

Readers never write: no adapter is opened (opening one may create its journal directory), no lock
is taken, nothing is cached. Every read is capped at ``max_bytes`` per file. Framework-free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from runtime.adapters.git.landed import git_landed_effect
from runtime.adapters.landed import LandedEffect
from runtime.adapters.workspace.landed import workspace_landed_effect

READERS: dict[str, Callable[..., LandedEffect]] = {
    "git": git_landed_effect,
    "workspace": workspace_landed_effect,
}
"""Adapter kind -> its reader (keyword arguments as :func:`landed_effect` passes them)."""


def landed_effect(*, adapter: str, target: Path, receipt: Mapping[str, Any], paths: Sequence[str],
                  max_bytes: int, max_files: int) -> LandedEffect | None:
    """What ``receipt``'s write left in the environment at ``target``, or None without a reader.

    Args:
        adapter: the environment's adapter kind from the run's task spec (``git``, ``workspace``...).
        target: the environment's directory.
        receipt: the receipt as a checkpoint or review case stores it (``result`` included).
        paths: the paths the pending intent plans to touch; each is read on both sides even when
            the landed write did not touch it.
        max_bytes: the largest file read, in bytes; a larger one is ``too_large``.
        max_files: the most paths returned.

    Returns:
        A :class:`LandedEffect` (read problems are reported in it, never raised), or None when
        the adapter kind has no reader.
    """
    reader = READERS.get(adapter)
    if reader is None:
        return None
    return reader(target=target, receipt=receipt, paths=paths, max_bytes=max_bytes, max_files=max_files)
