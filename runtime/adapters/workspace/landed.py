"""Read back the files a workspace receipt's write touched, as they are on disk now (DESIGN.md section 6.6).

A workspace keeps no history, so what "landed" can show is the file on disk now and whether it
still holds what the receipt says the write left. Paths are checked like every workspace path
(no ``..``, no ``.ratchet``, no ``.git``), confined to the workspace, and read without following
a symbolic link. Nothing is written. Framework-free.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runtime.adapters.landed import ABSENT, FileRead, LandedEffect, LandedFile
from runtime.adapters.paths import check_relative_path
from runtime.adapters.workspace.adapter import JOURNAL_DIR
from runtime.core.canonical import digest_bytes
from runtime.errors import RatchetError


def workspace_file_read(root: Path, path: str, *, max_bytes: int) -> FileRead:
    """The file ``path`` under ``root``, read without following a symlink and only when it
    resolves inside ``root``; at most ``max_bytes`` bytes (a larger file is ``too_large``)."""
    try:
        check_relative_path(path, reserved=(JOURNAL_DIR,))
    except RatchetError as exc:
        return FileRead("unreadable", note=exc.message)
    base = root.resolve()
    full = base / path
    try:
        parent = full.parent.resolve(strict=True)
    except (OSError, RuntimeError):
        return ABSENT
    if not parent.is_relative_to(base):
        return FileRead("unreadable", note="the path leads outside the environment; not read")
    try:
        info = os.lstat(full)
    except FileNotFoundError:
        return ABSENT
    except OSError as exc:
        return FileRead("unreadable", note=type(exc).__name__)
    if stat.S_ISLNK(info.st_mode):
        return FileRead("unreadable", note="a symbolic link; not followed")
    if not stat.S_ISREG(info.st_mode):
        return FileRead("unreadable", note="not a regular file")
    if info.st_size > max_bytes:
        return FileRead("too_large", size=info.st_size)
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        return FileRead("unreadable", note=type(exc).__name__)
    if len(data) > max_bytes:
        return FileRead("too_large", size=len(data))
    return FileRead("bytes", data=data, size=len(data))


def workspace_landed_effect(*, target: Path, receipt: Mapping[str, Any], paths: Sequence[str],
                            max_bytes: int, max_files: int) -> LandedEffect:
    """Each of ``paths`` as it is on disk in the workspace at ``target`` now.

    The op says whether the file still holds what the receipt's write left (the receipt's
    ``result`` names the ``path`` it wrote and the ``content`` digest), or was changed again
    since. ``before`` is None: a workspace keeps no earlier content. Arguments as
    :func:`runtime.adapters.readback.landed_effect`.
    """
    result = receipt.get("result") or {}
    every = sorted(set(paths))
    files = []
    for path in every[:max_files]:
        on_disk = workspace_file_read(target, path, max_bytes=max_bytes)
        op = "on disk now"
        if result.get("path") == path and on_disk.state == "bytes":
            op = ("on disk now: what the conflicting write left"
                  if digest_bytes(on_disk.data) == result.get("content")
                  else "on disk now: changed again since the conflicting write")
        files.append(LandedFile(path, op, on_disk))
    return LandedEffect(files=files, files_left_out=max(0, len(every) - max_files))
