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


def check_relative_path(path: Any, *, reserved: Iterable[str] = ()) -> str:
    """Validate a relative, ``/``-separated path inside an environment and return it.

    Rejected: non-strings, empty paths, absolute paths, backslashes, NUL or control characters,
    empty, ``.`` or ``..`` components, any ``.git`` component (any case) and a first component
    in ``reserved`` (case-insensitive; the workspace's ``.ratchet``). Symlinks are checked by
    each adapter against its own state, because only it knows what is on disk or in the tree.

    Args:
        path: the candidate path (an action's ``target`` or a change's ``path``).
        reserved: first-component names the adapter owns.

    Raises:
        PathEscapeError: the path is rejected.
    """
    if not isinstance(path, str) or not path:
        raise PathEscapeError("path must be a non-empty string", path=repr(path)[:80])
    if len(path) > MAX_PATH_CHARS:
        raise PathEscapeError(f"path is longer than {MAX_PATH_CHARS} characters", path=path[:80])
    if path.startswith("/"):
        raise PathEscapeError("absolute paths are not allowed", path=path)
    if "\\" in path or any(ord(ch) < 32 or ord(ch) == 127 for ch in path):
        # Backslashes are separators on other systems and control characters break the
        # line-oriented evidence (git trailers, diffs): refuse rather than guess.
        raise PathEscapeError("path contains a backslash or a control character", path=repr(path))
    parts = path.split("/")
    reserved_lower = {name.lower() for name in reserved}
    for index, part in enumerate(parts):
        if part in ("", ".", ".."):
            raise PathEscapeError("path has an empty, '.' or '..' component", path=path)
        if part.lower() == ".git":
            raise PathEscapeError("paths into .git are not allowed", path=path)
        if index == 0 and part.lower() in reserved_lower:
            raise PathEscapeError("path is inside the adapter's own journal", path=path)
    return path
