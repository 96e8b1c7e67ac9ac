"""Small files an adapter keeps beside an environment, written so a crash never tears them.

Full writes to a descriptor, fsync of a directory after a rename or unlink in it, and atomic
replacement (temp file, fsync, rename, fsync the directory) -- the ordering DESIGN.md section 5
relies on for the crash-window table. Imports nothing from Django.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write fewer than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync the directory ``path`` so a rename, create or unlink in it survives a power loss."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_replace(directory: Path, name: str, data: bytes) -> None:
    """Replace ``directory/name`` with ``data``: readers see the old bytes or the new, never a mix.

    The temp file ``<name>.tmp-<uuid>`` is created exclusively (mode 0644) in ``directory``,
    fsync'd, renamed over ``name``, and the directory is fsync'd.

    Raises:
        OSError: the directory is missing or not writable.
    """
    tmp = directory / f"{name}.tmp-{uuid.uuid4().hex}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, directory / name)
    fsync_dir(directory)
