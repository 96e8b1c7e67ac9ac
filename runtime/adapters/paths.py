"""Relative paths inside an environment, checked the same way by every adapter (DESIGN.md section 5).

A path an action names must stay inside the environment and out of what the adapter or git owns.
Symlinks are not judged here: only each adapter knows what is on disk or in its tree. Imports
nothing from Django.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from runtime.errors import PathEscapeError

MAX_PATH_CHARS = 4096

MAX_NAME_BYTES = 255
"""The longest path component, in bytes of its UTF-8 encoding: the file systems' ``NAME_MAX``.
A longer name cannot be created on disk, so it is refused before anything is journalled or
written, instead of failing as an untyped ``OSError`` halfway through a write."""


def relative_path_refusal(path: Any, *, reserved: Iterable[str] = ()) -> tuple[str, str] | None:
    """Why the adapters refuse ``path``, or None when they accept it: the one rule, shared.

    :func:`check_relative_path` raises with it; the task-spec loader applies the same rule to
    every file path a spec names, so a spec is refused at load time for a path the adapter
    would refuse mid-run (``runtime.taskspec.paths``, DESIGN.md section 2.2).

    Args:
        path: the candidate path.
        reserved: first-component names the adapter owns (case-insensitive).

    Returns:
        ``(reason, shown)``: the reason, and the path as the error shows it (cut or repr'd), or
        None.
    """
    if not isinstance(path, str) or not path:
        return "path must be a non-empty string", repr(path)[:80]
    if len(path) > MAX_PATH_CHARS:
        return f"path is longer than {MAX_PATH_CHARS} characters", path[:80]
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "path is not valid Unicode text (it holds a lone surrogate)", repr(path)[:80]
    if path.startswith("/"):
        return "absolute paths are not allowed", path
    if "\\" in path or any(ord(ch) < 32 or ord(ch) == 127 for ch in path):
        # Backslashes are separators on other systems and control characters break the
        # line-oriented evidence (git trailers, diffs): refuse rather than guess.
        return "path contains a backslash or a control character", repr(path)
    parts = path.split("/")
    reserved_lower = {name.lower() for name in reserved}
    for index, part in enumerate(parts):
        if part in ("", ".", ".."):
            return "path has an empty, '.' or '..' component", path
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            return (f"path component is longer than {MAX_NAME_BYTES} bytes, the file system's name "
                    "limit", path[:80] + "...")
        if part.lower() == ".git":
            return "paths into .git are not allowed", path
        if index == 0 and part.lower() in reserved_lower:
            return "path is inside the adapter's own journal", path
    return None


def check_relative_path(path: Any, *, reserved: Iterable[str] = ()) -> str:
    """Validate a relative, ``/``-separated path inside an environment and return it.

    Rejected (:func:`relative_path_refusal`): non-strings, empty paths, absolute paths,
    backslashes, NUL or control characters, empty, ``.`` or ``..`` components, any ``.git``
    component (any case) and a first component in ``reserved`` (case-insensitive; the
    workspace's ``.ratchet``). Symlinks are checked by each adapter against its own state,
    because only it knows what is on disk or in the tree.

    Args:
        path: the candidate path (an action's ``target`` or a change's ``path``).
        reserved: first-component names the adapter owns.

    Raises:
        PathEscapeError: the path is rejected.
    """
    refusal = relative_path_refusal(path, reserved=reserved)
    if refusal is not None:
        reason, shown = refusal
        raise PathEscapeError(reason, path=shown)
    return path
