"""What a git environment is and looks like now: instance id, HEAD, uncommitted entries, fingerprint.

The fingerprint (DESIGN.md section 3, environment; section 5, drift) is a typed digest
(``DigestKind.ENVIRONMENT``) over ``{"tree": HEAD's tree sha, "dirty": sorted entries}``: one
``{xy, path, content}`` per ``git status`` entry, ``content`` being the sha256 of what is in the
working tree (or the link target), plus one ``{"xy": "LK", "path": ".git/<name>"}`` per git lock
file in ``.git``. Callers run recovery first, so a lock still there belongs to a process
outside Ratchet. Imports nothing from Django.
"""

from __future__ import annotations

import hashlib
import os
import stat
import uuid
from pathlib import Path
from typing import Any

from runtime.adapters.git_process import GitProcess
from runtime.adapters.git_recovery import Operation, git_lock_files, journal_begin, journal_end
from runtime.core.canonical import DigestKind, digest
from runtime.errors import AdapterStoreCorruptError

LOCK_ENTRY = "LK"
CONFIG_INSTANCE_ID = "ratchet.instance-id"


def instance_id_load_or_create(git: GitProcess, git_dir: Path) -> str:
    """The repository's ``ratchet.instance-id`` (its own ``.git/config``), created once.

    ``git clone`` does not copy it, so a clone is another instance (DESIGN.md section 5). The
    caller holds the adapter lock; the config write is journalled like any locking git call.

    Raises:
        AdapterStoreCorruptError: the stored value is empty, too long or holds whitespace.
        AdapterCommandError: git failed.
    """
    got = git.run(["config", "--local", "--get", CONFIG_INSTANCE_ID], check=False)
    if got.returncode == 1:
        new = str(uuid.uuid4())
        journal_begin(git_dir, Operation("config", ("config.lock",)))
        git.run(["config", "--local", CONFIG_INSTANCE_ID, new])
        journal_end(git_dir)
        return new
    if got.returncode != 0:
        raise git.error(["config"], got)
    value = got.stdout.decode("utf-8", "replace").strip()
    if not value or len(value) > 200 or any(ch.isspace() for ch in value):
        raise AdapterStoreCorruptError(
            f"{CONFIG_INSTANCE_ID} in the repository config is invalid", target=str(git.root))
    return value


def display_path(path_bytes: bytes) -> str:
    """A path from git output as text (bytes that are not UTF-8 as backslash escapes)."""
    return path_bytes.decode("utf-8", "backslashreplace")


def head_and_tree(git: GitProcess) -> tuple[str, str]:
    """``(HEAD commit id, its tree id)``."""
    out = git.run(["log", "-1", "--format=%H%x1f%T", "HEAD", "--"]).stdout
    head, _, tree = out.decode("ascii").strip().partition("\x1f")
    return head, tree


def dirty_entries(git: GitProcess, git_dir: Path) -> list[dict[str, Any]]:
    """Uncommitted entries and git lock files, sorted (see the module docstring)."""
    out = git.run(["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames",
                   "--ignore-submodules=none"], env={"GIT_OPTIONAL_LOCKS": "0"}).stdout
    entries = []
    for record in out.split(b"\0"):
        if len(record) < 4:
            continue
        path = record[3:]
        entries.append({"xy": record[:2].decode("ascii", "replace"), "path": display_path(path),
                        "content": _worktree_digest(git.root, path)})
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
