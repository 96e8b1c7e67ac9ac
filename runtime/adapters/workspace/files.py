"""Files of a workspace reached without following symlinks (DESIGN.md section 5).

Writes never follow symlinks: directories are walked with ``O_NOFOLLOW`` relative to directory
file descriptors, and a symlink anywhere on a path is rejected (:class:`PathEscapeError`), so a
link swapped in by another process cannot redirect a write outside the workspace. Paths here are
relative, ``/``-separated and already checked by :func:`runtime.adapters.paths.check_relative_path`.
Imports nothing from Django.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import time
from pathlib import Path
from typing import Any

from runtime.adapters.actions import FileChange
from runtime.adapters.workspace.known_digests import digest_remember, known_digest
from runtime.errors import ConcurrentWriteError, PathEscapeError, PreconditionFailedError

Entry = dict[str, Any]
"""A fingerprint entry: ``{"sha256": hex, "executable": bool}`` for a regular file,
``{"symlink": target}``, ``{"directory": true}`` or ``{"special": kind}``."""

UNREADABLE: Entry = {"unreadable": True}
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def display_name(name: str) -> str:
    """``name`` as valid UTF-8 text, showing the bytes of a name the OS gave with surrogates."""
    # Non-UTF-8 names come back from the OS with surrogate escapes, which canonical JSON refuses;
    # show their bytes instead so the fingerprint still covers them.
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _file_entry(fd: int) -> Entry:
    st = os.fstat(fd)
    executable = bool(st.st_mode & stat.S_IXUSR)
    known = known_digest(st)
    if known is not None:
        return {"sha256": known, "executable": executable}
    read_at = time.time_ns()
    h = hashlib.sha256()
    while chunk := os.read(fd, 1 << 20):
        h.update(chunk)
    sha256 = h.hexdigest()
    digest_remember(st, sha256, read_at_ns=read_at)
    return {"sha256": sha256, "executable": executable}


def entry_at(dir_fd: int, name: str) -> Entry | None:
    """The entry named ``name`` in the open directory ``dir_fd``, never following a symlink.

    None when nothing has that name; :data:`UNREADABLE` for a regular file that cannot be opened.
    """
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return {"symlink": display_name(os.readlink(name, dir_fd=dir_fd))}
    if stat.S_ISDIR(st.st_mode):
        return {"directory": True}
    if not stat.S_ISREG(st.st_mode):
        return {"special": stat.filemode(st.st_mode)[0]}
    known = known_digest(st)
    if known is not None:  # unchanged since it was hashed: no need to open it
        return {"sha256": known, "executable": bool(st.st_mode & stat.S_IXUSR)}
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return UNREADABLE
    try:
        return _file_entry(fd)
    finally:
        os.close(fd)


def open_dir(root: Path, parts: list[str], *, create: bool) -> int | None:
    """Open ``root/parts`` as a directory fd without following symlinks.

    Returns None when a component is missing and ``create`` is False.

    Raises:
        PathEscapeError: a component is a symlink.
        PreconditionFailedError: a component is not a directory.
        ConcurrentWriteError: a component changed between the check and the open.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, name in enumerate(parts):
            where = "/".join(parts[: i + 1])
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if not create:
                    os.close(fd)
                    return None
                os.mkdir(name, 0o755, dir_fd=fd)
                os.fsync(fd)
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                raise PathEscapeError("a directory on the path is a symlink", path=where)
            if not stat.S_ISDIR(st.st_mode):
                raise PreconditionFailedError("a non-directory is in the way of the path",
                                              path=where)
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError:
                raise ConcurrentWriteError("a directory on the path changed while being opened",
                                           path=where) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_target(root: Path, change: FileChange) -> Entry | None:
    """The target's current entry (None when absent), after checking the write can apply.

    Raises:
        PathEscapeError: a symlink on the path or at the target.
        PreconditionFailedError: a file in the way, the target is a directory or special
            file, or a delete of a file that does not exist.
    """
    parts = change.path.split("/")
    dir_fd = open_dir(root, parts[:-1], create=False)
    pre: Entry | None = None
    if dir_fd is not None:
        try:
            pre = entry_at(dir_fd, parts[-1])
        finally:
            os.close(dir_fd)
    if pre is not None and "symlink" in pre:
        raise PathEscapeError("the target is a symlink; links are never written through or "
                              "replaced", path=change.path)
    if pre is not None and "sha256" not in pre:
        raise PreconditionFailedError("the target is not a regular file", path=change.path)
    if change.op == "delete" and pre is None:
        raise PreconditionFailedError("nothing to delete: the file does not exist",
                                      path=change.path)
    return pre


def current_entry(root: Path, path: str) -> Entry | None:
    """Like :func:`check_target` but for recovery: never raises for odd paths."""
    parts = path.split("/")
    try:
        dir_fd = open_dir(root, parts[:-1], create=False)
    except (PathEscapeError, PreconditionFailedError, ConcurrentWriteError):
        return UNREADABLE
    if dir_fd is None:
        return None
    try:
        return entry_at(dir_fd, parts[-1])
    finally:
        os.close(dir_fd)


def read_file(root: Path, path: str) -> bytes:
    """The bytes of the file at ``root/path``; ``b""`` when its directory does not exist.

    Raises:
        PathEscapeError, PreconditionFailedError, ConcurrentWriteError: as for :func:`open_dir`.
        OSError: the file cannot be opened (a symlink gives ``ELOOP``).
    """
    parts = path.split("/")
    dir_fd = open_dir(root, parts[:-1], create=False)
    if dir_fd is None:
        return b""
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def remove_leftover(root: Path, path: str) -> None:
    """Unlink ``root/path`` (a write's temp file) if it is still there; never raises for odd paths.

    The directory is fsync'd after the unlink, so the removal survives a crash.
    """
    parts = path.split("/")
    try:
        dir_fd = open_dir(root, parts[:-1], create=False)
    except (PathEscapeError, PreconditionFailedError, ConcurrentWriteError):
        return
    if dir_fd is None:
        return
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(parts[-1], dir_fd=dir_fd)
            os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
