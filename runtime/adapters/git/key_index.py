"""The git adapter's key index: idempotency key -> commit, kept current without rescanning history.

Looking a key up used to scan every commit above the base on every call (``git log --grep``), so
a write cost O(commits made so far). The index is derived from the commit trailers and nothing
else (read by the one trailer reader, :mod:`runtime.adapters.git.trailers`, through
:mod:`runtime.adapters.git.receipts`, as a receipt is): it remembers the HEAD it was
built at, the Ratchet commits reachable from it (above the instance's base) grouped by key, and
the newest ``Fencing-Token``. Commit ids name immutable content, so what is reachable from that
HEAD never changes; when HEAD moves, the index reads only what is new:

* HEAD unchanged: nothing to read (the common case: the adapter's own write moved it, and
  :meth:`KeyIndex.record` added that commit as it was read back);
* HEAD a descendant of the indexed one (read in-process with libgit2, no git child): one
  ``git log`` of the commits reachable from HEAD and not from the indexed HEAD or the base;
* anything else (history rewritten, the indexed commit gone): rebuilt from every commit above
  the base.

So the index is never trusted over the trailers: it is the trailers of exactly the commits
reachable from HEAD. It lives in the adapter object (one per process), not on disk: a new
process rebuilds it once with one scan, and every later call reads only the difference
(DESIGN.md section 5.5). Imports nothing from Django.
"""

from __future__ import annotations

import pygit2

from runtime.adapters.git.process import GitProcess
from runtime.adapters.git.receipts import TRAILER_FENCE, LoggedCommit, find_key, ratchet_commits


def _descends(repo: pygit2.Repository, head: str, ancestor: str) -> bool:
    if head == ancestor:
        return True
    try:
        return bool(repo.descendant_of(head, ancestor))
    except (pygit2.GitError, KeyError, ValueError):
        return False  # e.g. the indexed commit no longer exists: rebuild


class KeyIndex:
    """Ratchet commits above ``base`` reachable from one HEAD, by key (see the module docstring).

    Args:
        base: the instance's base commit, or None for its whole history.
        instance_id: names the instance in errors.
    """

    def __init__(self, *, base: str | None, instance_id: str) -> None:
        self._base = base
        self._instance_id = instance_id
        self._head: str | None = None
        self._commits: list[LoggedCommit] = []
        self._by_key: dict[str, list[LoggedCommit]] = {}
        self._newest_token = 0

    def refresh(self, git: GitProcess, repo: pygit2.Repository, head: str) -> None:
        """Bring the index to ``head`` (a commit id), reading only what it does not hold.

        Raises:
            AdapterCommandError: git failed.
            AdapterStoreCorruptError: a git log record is malformed.
        """
        if self._head == head:
            return
        if self._head is not None and _descends(repo, head, self._head):
            new = ratchet_commits(git, repo, instance_id=self._instance_id, base=self._base,
                                  since=self._head)
        else:
            self._commits, self._by_key, self._newest_token = [], {}, 0
            new = ratchet_commits(git, repo, instance_id=self._instance_id, base=self._base)
        for commit in new:
            self._add(commit)
        self._head = head

    def record(self, commit: LoggedCommit) -> None:
        """Add the commit the adapter just made on top of the indexed HEAD (read back from git).

        When the index is not at that commit's parent it is left to :meth:`refresh`.
        """
        if self._head is None or commit.parents[:1] != (self._head,):
            self._head = None
            return
        if commit.keys:
            self._add(commit)
        self._head = commit.sha

    def _add(self, commit: LoggedCommit) -> None:
        self._commits.append(commit)
        for key in commit.keys:
            self._by_key.setdefault(key, []).append(commit)
        for value in commit.trailers.get(TRAILER_FENCE.lower(), ()):
            if value.isdigit():
                self._newest_token = max(self._newest_token, int(value))

    def find(self, key: str) -> LoggedCommit | None:
        """The one commit carrying ``key``, or None.

        Raises:
            DuplicateReceiptError: more than one commit carries it.
        """
        return find_key(self._by_key.get(key, ()), key, instance_id=self._instance_id)

    def commits(self) -> list[LoggedCommit]:
        """Every indexed commit with an ``Idempotency-Key``, oldest first (a topological order)."""
        return list(self._commits)

    def newest_token(self) -> int:
        """The largest ``Fencing-Token`` on an indexed commit (0 when there is none)."""
        return self._newest_token
