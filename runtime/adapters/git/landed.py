"""Read back the commit a git receipt names: its message and the files it changed (DESIGN.md section 6.6).

The commit is read in-process with libgit2 from the repository's object database; nothing is
written, no lock is taken and the working tree is not looked at. Framework-free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pygit2

from runtime.adapters.git.receipts import original_message
from runtime.adapters.landed import ABSENT, FileRead, LandedEffect, LandedFile

_STATUS_WORDS = {"A": "added", "M": "modified", "D": "deleted", "T": "type changed", "R": "renamed"}


def _blob(repo: pygit2.Repository, tree: pygit2.Tree | None, path: str, *, max_bytes: int) -> FileRead:
    if tree is None:
        return ABSENT
    try:
        entry = tree[path]
    except KeyError:
        return ABSENT
    obj = repo.get(entry.id)
    if not isinstance(obj, pygit2.Blob):
        return FileRead("unreadable", note=f"a {entry.type_str} in the tree, not a file")
    if obj.size > max_bytes:
        return FileRead("too_large", size=obj.size, digest=f"git:{entry.id}")
    return FileRead("bytes", data=obj.data, size=obj.size)


def git_landed_effect(*, target: Path, receipt: Mapping[str, Any], paths: Sequence[str],
                      max_bytes: int, max_files: int) -> LandedEffect:
    """The commit ``receipt["result"]["commit"]`` of the repository at ``target``, read back.

    Each returned file is a path the commit changed or one of ``paths`` (the pending intent's),
    with the commit's content (``landed``) and its first parent's (``before``). The message is
    the commit's own without Ratchet's trailer block (:func:`original_message`); a message
    without one (a commit Ratchet did not write) is shown whole. Arguments as
    :func:`runtime.adapters.readback.landed_effect`; problems are reported in ``error``.
    """
    sha = (receipt.get("result") or {}).get("commit")
    try:
        repo = pygit2.Repository(str(target))
        commit = repo.get(sha) if isinstance(sha, str) else None
    except (pygit2.GitError, ValueError, KeyError) as exc:
        return LandedEffect(error=f"the repository could not be read ({type(exc).__name__})")
    if not isinstance(commit, pygit2.Commit):
        return LandedEffect(error="the landed commit is not in the repository any more")
    try:
        message = original_message(commit.raw_message).decode("utf-8", "replace")
    except ValueError:
        message = commit.raw_message.decode("utf-8", "replace")
    parent_tree = commit.parents[0].tree if commit.parents else None
    diff = repo.diff(parent_tree, commit.tree) if parent_tree is not None else commit.tree.diff_to_tree(swap=True)
    changed = {(d.new_file.path or d.old_file.path): d.status_char() for d in diff.deltas}
    every = sorted(set(paths) | set(changed))
    files = [
        LandedFile(path, _STATUS_WORDS.get(changed.get(path, ""), "unchanged"),
                   _blob(repo, commit.tree, path, max_bytes=max_bytes),
                   _blob(repo, parent_tree, path, max_bytes=max_bytes))
        for path in every[:max_files]
    ]
    return LandedEffect(message=message, files=files, files_left_out=max(0, len(every) - max_files))
