"""Finishing or undoing a git write that a SIGKILL interrupted, inside or between git children.

The operation journal. Before the adapter starts a git child that takes a lock inside
``.git`` -- ``update-ref`` (``HEAD.lock``, ``refs/heads/<branch>.lock``), the ``read-tree -m -u``
that brings the index and working tree to the new commit (``index.lock``), ``git config``
(``config.lock``) -- it writes ``.git/ratchet-sync.json`` (atomically, fsync'd) naming the
operation, the lock files it may leave behind and, for a commit, ``{old, new, old_tree,
new_tree}``. The journal is removed when the operation is complete.

Telling our interrupted operation from a foreign one. Every call that finds a journal runs
:func:`recover` first, under the adapter's ``flock``. Every git child inherits the locked
descriptor (:mod:`runtime.adapters.git.process`), so holding the lock proves that no git
process Ratchet started on this repository is alive -- not even one orphaned by a killed
worker -- and that no other Ratchet writer is inside an operation (the lease decides which
worker may write at all; the lock decides who touches the repository now; DESIGN.md section 4).
A ``*.lock`` file is judged ours, and stale, only when all of this holds:

* a journal exists and names it, and the lock is not older than the journal;
* the interrupted step could have made it: ref locks at any time, ``index.lock`` only once
  HEAD has moved to the journal's new commit (the index is touched only after the ref);
* no live process holds it open (git keeps a lock file open while it works; checked through
  ``/proc`` where there is one), so a developer's ``git`` that started after the crash keeps its
  lock. When recovery cannot finish, the locks still present are taken off the journal: our
  children have all exited by then, so they are someone else's.

Any other lock file is foreign: nothing is cleared or restored, :func:`git_lock_files` reports
it, ``observe()`` lists it as drift (a changed fingerprint) and ``execute`` refuses, so the run
freezes for a human exactly as for a foreign edit.

Restoring. With our stale locks gone: HEAD still at ``old`` means the ref never moved (the
commit is unreferenced garbage; the caller writes it again under the same key). HEAD at ``new``
means the write is committed and the index and working tree are brought to ``new_tree``: every
uncommitted path must be one the write changes, holding that path's old or new content, no entry
at all, or a strict prefix of the new content (git's checkout unlinks the old entry, then writes
the new file in place, so a kill can leave either gap); then those paths are removed and
``read-tree --reset -u`` writes them from the committed tree. Anything else is a foreign edit: nothing
is touched, the journal stays and the drift shows. HEAD anywhere else: another writer moved it,
so nothing of ours is left to finish. Imports nothing from Django.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from runtime.adapters.durable_files import atomic_replace, fsync_dir
from runtime.adapters.git.commit_params import EXECUTABLE, GITLINK, REGULAR, SYMLINK
from runtime.adapters.git.process import GitProcess
from runtime.core.canonical import canonical_json
from runtime.core.crashpoints import crash_point, register

JOURNAL_FILE = "ratchet-sync.json"
LOCK_FILE = "ratchet.lock"
_ABSENT = "000000"
_REF_LOCKS = ("HEAD.lock", "packed-refs.lock", "reftable/tables.list.lock")
_CLOCK_SLACK_SECONDS = 2.0

CP_RECOVER_AFTER_LOCKS = register(
    "git.recover_after_locks_cleared",
    "git recovery: stale lock files of an interrupted write removed; index and working tree "
    "not yet restored, journal kept",
)
CP_RECOVER_AFTER_CLEAR = register(
    "git.recover_after_worktree_cleared",
    "git recovery: the interrupted write's half-written paths removed from the working tree; "
    "not yet checked out from the committed tree, journal kept",
)


@dataclass(frozen=True)
class Operation:
    """A journalled git operation: ``"commit"`` (with its ids) or ``"config"``."""

    op: str
    locks: tuple[str, ...]
    old: str = ""
    new: str = ""
    old_tree: str = ""
    new_tree: str = ""


def commit_operation(git_dir: Path, *, old: str, new: str, old_tree: str, new_tree: str
                     ) -> Operation:
    """The journal entry for moving HEAD from ``old`` to ``new`` and checking it out."""
    locks = list(_REF_LOCKS)
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        head = ""
    if head.startswith("ref: "):
        locks.append(head.removeprefix("ref: ") + ".lock")
    locks.append("index.lock")
    return Operation("commit", tuple(locks), old, new, old_tree, new_tree)


def journal_begin(git_dir: Path, operation: Operation) -> None:
    """Persist ``operation`` before its first git child starts."""
    atomic_replace(git_dir, JOURNAL_FILE, canonical_json(
        {"op": operation.op, "locks": list(operation.locks), "old": operation.old,
         "new": operation.new, "old_tree": operation.old_tree, "new_tree": operation.new_tree}))


def journal_end(git_dir: Path) -> None:
    """Remove the journal: the operation is complete (or provably never happened)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(git_dir / JOURNAL_FILE)
        fsync_dir(git_dir)


def journal_read(git_dir: Path) -> tuple[Operation | None, float]:
    """The journalled operation and the journal's mtime; ``(None, 0)`` when there is none.

    A journal that does not parse (torn by an old version's crash) reads as an operation that
    owns no locks, so recovery only removes it.
    """
    path = git_dir / JOURNAL_FILE
    try:
        raw, mtime = path.read_bytes(), path.stat().st_mtime
    except FileNotFoundError:
        return None, 0.0
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return Operation("unknown", ()), mtime
    ids = {k: data.get(k) for k in ("old", "new", "old_tree", "new_tree")}
    if not all(isinstance(v, str) for v in ids.values()):
        return Operation("unknown", ()), mtime
    locks = data.get("locks")
    if locks is None:  # a marker written before the journal named its locks
        locks = list(_REF_LOCKS) + ["index.lock"]
    if not isinstance(locks, list) or not all(isinstance(x, str) for x in locks):
        return Operation("unknown", ()), mtime
    return Operation(str(data.get("op", "commit")), tuple(locks), **ids), mtime  # type: ignore[arg-type]


def git_lock_files(git_dir: Path) -> list[str]:
    """``*.lock`` files git leaves while it changes a ref, the index or the config.

    Relative to ``git_dir`` with ``/`` separators; the adapter's own ``ratchet.lock`` (a
    permanent ``flock`` target) is not one of them.
    """
    found: list[str] = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(git_dir):
            if entry.name.endswith(".lock") and entry.name != LOCK_FILE:
                found.append(entry.name)
    # Plain strings, not Path objects: this runs on every look at the environment.
    pending = [(os.path.join(git_dir, sub), sub) for sub in ("refs", "logs", "reftable")]
    while pending:
        directory, rel = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                pending.append((entry.path, f"{rel}/{entry.name}"))
            elif entry.name.endswith(".lock"):
                found.append(f"{rel}/{entry.name}")
    return sorted(found)


def recover(git: GitProcess, git_dir: Path, *, head: str, fresh: bool = False) -> bool:
    """Finish or drop the journalled operation; see the module docstring.

    Args:
        git: the adapter's git runner; the caller holds the adapter lock.
        git_dir: the repository's ``.git`` directory.
        head: the commit HEAD points at now.
        fresh: the caller itself just moved HEAD (so nothing can be half-written yet) and
            tries the cheap two-tree checkout first.

    Returns:
        True when no journal is left; False when foreign locks or edits block recovery (the
        journal stays and the caller's observation shows the drift).
    """
    operation, since = journal_read(git_dir)
    if operation is None:
        return True
    present = git_lock_files(git_dir)
    ours = set(operation.locks)
    if operation.op == "commit" and head != operation.new:
        ours.discard("index.lock")
    for name in present:
        if name not in ours or _mtime(git_dir / name) < since - _CLOCK_SLACK_SECONDS:
            return False
    if present and _held_open({os.path.realpath(git_dir / name) for name in present}):
        return False
    for name in present:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(git_dir / name)
    if present:
        fsync_dir(git_dir)
        crash_point(CP_RECOVER_AFTER_LOCKS)
    if operation.op != "commit" or head != operation.new:
        journal_end(git_dir)
        return True
    if fresh and git.run(["read-tree", "-m", "-u", operation.old_tree, operation.new_tree],
                         check=False).returncode == 0:
        journal_end(git_dir)
        return True
    if not _restore(git, operation):
        _disown(git_dir, operation)
        return False
    journal_end(git_dir)
    return True


def _disown(git_dir: Path, operation: Operation) -> None:
    """Our git children have all exited, so a lock present now is someone else's: take it off
    the journal, or a later recovery would judge it ours."""
    foreign = set(git_lock_files(git_dir)) & set(operation.locks)
    if foreign:
        journal_begin(git_dir, replace(operation, locks=tuple(
            name for name in operation.locks if name not in foreign)))


def _held_open(paths: set[str]) -> bool:
    """Whether a live process has one of ``paths`` open (git keeps its lock file open while it
    works). Reads ``/proc``; where there is none, the journal and the lock decide alone."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return False
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in paths:
                    return True
            except OSError:
                continue
    return False


def _mtime(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except FileNotFoundError:
        return float("inf")  # gone meanwhile: nothing left to judge


def _restore(git: GitProcess, operation: Operation) -> bool:
    """Bring a half-checked-out index and working tree to ``new_tree``, or touch nothing."""
    status = git.run(["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames",
                      "--ignore-submodules=none"], env={"GIT_OPTIONAL_LOCKS": "0"}).stdout
    dirty = {r[3:].decode("utf-8", "surrogateescape") for r in status.split(b"\0") if len(r) > 3}
    if not dirty:
        return True
    out = git.run(["diff-tree", "-r", "-z", "--no-renames", operation.old_tree,
                   operation.new_tree]).stdout.split(b"\0")
    changed: dict[str, list[tuple[str, str]]] = {}
    for meta, raw_path in zip(out[0::2], out[1::2], strict=False):
        if not meta:
            break
        old_mode, new_mode, old_oid, new_oid, _status = meta.lstrip(b":").decode().split(" ")
        changed[raw_path.decode("utf-8", "surrogateescape")] = [(old_mode, old_oid),
                                                                 (new_mode, new_oid)]
    if not dirty <= set(changed):
        return False
    found = {p: _matches(git.root / p, versions) for p, versions in changed.items()}
    if any(result is False for result in found.values()):
        return False
    unsure = [p for p, result in found.items() if result is None]
    if unsure:
        unsure = _unmatched_after_filters(git, unsure, changed)
    if unsure and not _torn_writes(git, unsure, changed):
        return False
    for path in sorted(changed, key=lambda p: -p.count("/")):
        _remove(git.root, path)
    crash_point(CP_RECOVER_AFTER_CLEAR)
    return git.run(["read-tree", "--reset", "-u", operation.new_tree],
                   check=False).returncode == 0


def _blob_id(data: bytes, like: str) -> str:
    header = f"blob {len(data)}\0".encode("ascii")
    h = hashlib.sha1(usedforsecurity=False) if len(like) == 40 else hashlib.sha256()
    h.update(header + data)
    return h.hexdigest()


def _matches(path: Path, versions: list[tuple[str, str]]) -> bool | None:
    """Whether ``path`` holds one of ``versions``; None when only filters could tell."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return True  # checkout unlinks the old entry before it writes the new one
    if stat.S_ISDIR(st.st_mode):
        return any(mode in (_ABSENT, GITLINK) for mode, _ in versions)
    like = versions[0][1]
    if stat.S_ISLNK(st.st_mode):
        return (SYMLINK, _blob_id(os.fsencode(os.readlink(path)), like)) in versions
    if not stat.S_ISREG(st.st_mode):
        return False
    mode = EXECUTABLE if st.st_mode & stat.S_IXUSR else REGULAR
    if (mode, _blob_id(path.read_bytes(), like)) in versions:
        return True
    return None if any(m == mode for m, _ in versions) else False


def _unmatched_after_filters(git: GitProcess, paths: list[str],
                             changed: dict[str, list[tuple[str, str]]]) -> list[str]:
    """Those of ``paths`` that match no version even hashed as git stores them (line-ending
    attributes applied)."""
    if any("\n" in p for p in paths):
        return paths
    payload = "".join(p + "\n" for p in paths).encode("utf-8", "surrogateescape")
    out = git.run(["hash-object", "--stdin-paths"], input=payload).stdout.decode().split()
    if len(out) != len(paths):
        return paths
    return [p for p, got in zip(paths, out, strict=True)
            if not any(oid == got for _, oid in changed[p])]


def _torn_writes(git: GitProcess, paths: list[str], changed: dict[str, list[tuple[str, str]]]
                 ) -> bool:
    """Whether every path holds a strict prefix of its new content: a file the killed checkout
    was still writing (git writes checkout files in place, not by rename)."""
    news = [changed[p][1] for p in paths]
    if any(mode not in (REGULAR, EXECUTABLE) for mode, _ in news):
        return False
    out = git.run(["cat-file", "--batch"], input="".join(oid + "\n" for _, oid in news).encode()
                  ).stdout
    pos = 0
    for path in paths:
        newline = out.index(b"\n", pos)
        size = int(out[pos:newline].split(b" ")[2])
        blob = out[newline + 1 : newline + 1 + size]
        pos = newline + 1 + size + 1
        on_disk = (git.root / path).read_bytes()
        if len(on_disk) >= len(blob) or not blob.startswith(on_disk):
            return False
    return True


def _remove(root: Path, rel: str) -> None:
    path = root / rel
    with contextlib.suppress(FileNotFoundError, NotADirectoryError, OSError):
        if path.is_dir() and not path.is_symlink():
            path.rmdir()  # only an empty (gitlink) directory; a subtree's files are listed too
        else:
            path.unlink()
    parent = path.parent
    while parent != root:
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent
