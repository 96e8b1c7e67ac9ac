"""What a git environment is and looks like now: instance id, HEAD, uncommitted entries, fingerprint.

The fingerprint (DESIGN.md section 3, environment; section 5, drift) is a typed digest
(``DigestKind.ENVIRONMENT``) over ``{"tree": HEAD's tree sha, "dirty": sorted entries}``: one
``{xy, path, content}`` per ``git status`` entry (asked in-process first,
:mod:`runtime.adapters.git.status`), ``content`` being the sha256 of what is in the
working tree (or the link target), plus one ``{"xy": "LK", "path": ".git/<name>"}`` per git lock
file in ``.git``. Callers run recovery first, so a lock still there belongs to a process
outside Ratchet. Imports nothing from Django.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import uuid
from pathlib import Path
from typing import Any

from runtime.adapters.git.process import GitProcess
from runtime.adapters.git.recovery import Operation, git_lock_files, journal_begin, journal_end
from runtime.adapters.git.status import WorktreeStatus
from runtime.core.canonical import DigestKind, digest
from runtime.errors import AdapterStoreCorruptError

LOCK_ENTRY = "LK"
CONFIG_INSTANCE_ID = "ratchet.instance-id"
CONFIG_BASE_COMMIT = "ratchet.base-commit"
_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def instance_load_or_create(git: GitProcess, git_dir: Path) -> tuple[str, str | None]:
    """``(ratchet.instance-id, ratchet.base-commit)`` from the repository's own ``.git/config``.

    Both are created together, once, when the adapter first opens the repository: the base is
    HEAD at that moment. ``git clone`` copies neither, so a clone is another instance with its
    own base (DESIGN.md section 5.5). Only commits above the base (reachable from HEAD, not
    from the base) can be receipts of this instance: whatever the history below holds -- a
    replayed source's own ``Idempotency-Key`` or ``Fencing-Token`` trailers, someone else's
    receipts -- was never written by it. The base is None for an instance created before the
    base was recorded (its whole history is read, as it always was). The base is written
    before the instance id, so a kill between the two leaves no instance without a base. The
    caller holds the adapter lock; the config write is journalled like any locking git call.

    Raises:
        AdapterStoreCorruptError: a stored value is empty, too long, holds whitespace, or the
            base is not a full object id.
        AdapterCommandError: git failed.
    """
    got = git.run(["config", "--local", "--get", CONFIG_INSTANCE_ID], check=False)
    if got.returncode == 1:
        new = str(uuid.uuid4())
        head = git.run(["rev-parse", "--verify", "HEAD^{commit}"]).stdout.decode("ascii").strip()
        journal_begin(git_dir, Operation("config", ("config.lock",)))
        git.run(["config", "--local", CONFIG_BASE_COMMIT, head])
        git.run(["config", "--local", CONFIG_INSTANCE_ID, new])
        journal_end(git_dir)
        return new, head
    if got.returncode != 0:
        raise git.error(["config"], got)
    value = got.stdout.decode("utf-8", "replace").strip()
    if not value or len(value) > 200 or any(ch.isspace() for ch in value):
        raise AdapterStoreCorruptError(
            f"{CONFIG_INSTANCE_ID} in the repository config is invalid", target=str(git.root))
    based = git.run(["config", "--local", "--get", CONFIG_BASE_COMMIT], check=False)
    if based.returncode == 1:
        return value, None
    if based.returncode != 0:
        raise git.error(["config"], based)
    base = based.stdout.decode("utf-8", "replace").strip()
    if not _OBJECT_ID.fullmatch(base):
        raise AdapterStoreCorruptError(
            f"{CONFIG_BASE_COMMIT} in the repository config is not a commit id",
            target=str(git.root))
    return value, base


def display_path(path_bytes: bytes) -> str:
    """A path from git output as text (bytes that are not UTF-8 as backslash escapes)."""
    return path_bytes.decode("utf-8", "backslashreplace")


def dirty_entries(status: WorktreeStatus, git_dir: Path) -> list[dict[str, Any]]:
    """Uncommitted entries and git lock files, sorted (see the module docstring).

    Args:
        status: the repository's :class:`WorktreeStatus` (libgit2 first, git when it sees
            anything: the entries are always git's).
        git_dir: the repository's ``.git`` directory (for the lock files).

    Raises:
        AdapterCommandError: git failed.
    """
    root = status.root
    entries = [{"xy": xy.decode("ascii", "replace"), "path": display_path(path),
                "content": _worktree_digest(root, path)} for xy, path in status.records()]
    entries.extend({"xy": LOCK_ENTRY, "path": f".git/{name}", "content": None}
                   for name in git_lock_files(git_dir))
    return sorted(entries, key=lambda e: (e["path"], e["xy"]))


def fingerprint(tree: str, dirty: list[dict[str, Any]]) -> str:
    """The environment fingerprint of ``tree`` plus ``dirty`` entries."""
    return digest(DigestKind.ENVIRONMENT, {"tree": tree, "dirty": dirty})


def _worktree_digest(root: Path, path: bytes) -> str | None:
    full = os.path.join(os.fsencode(root), path)
    try:
        st = os.lstat(full)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "symlink:" + display_path(os.readlink(full))
    if not stat.S_ISREG(st.st_mode):
        return None
    h = hashlib.sha256()
    try:
        with open(full, "rb") as handle:
            while chunk := handle.read(1 << 20):
                h.update(chunk)
    except OSError:
        return None
    mode = "x" if st.st_mode & stat.S_IXUSR else "-"
    return f"sha256:{h.hexdigest()}:{mode}"
