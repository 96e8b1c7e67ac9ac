"""The cost baseline: the same commits made by a plain ``git`` loop, without Ratchet.

In a scratch clone at the replay's base, each source commit of the range is re-made with two git
processes: ``read-tree -u --reset <commit>`` (index and work tree to the commit's tree) and
``commit --allow-empty -C <commit>`` (its message and author). That is what a shell script that
replays history would do, with none of Ratchet's checkpoints, receipts, fencing or post-state
checks, so ``replay ms/write / baseline ms/commit`` is the price of exactly-once.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from runtime.replay_check.repository import ReplayRange, git, same_tree_content, tree_of

_COMMITTER = {"GIT_COMMITTER_NAME": "replay-check baseline", "GIT_COMMITTER_EMAIL": "baseline@invalid"}


@dataclass(frozen=True)
class Baseline:
    """A timed plain git loop.

    Attributes:
        commits: commits made.
        seconds: wall time of the loop (the clone is not counted).
        tree_matches: the loop's final tree has the source tip's entries (a sanity check).
    """

    commits: int
    seconds: float
    tree_matches: bool

    @property
    def ms_per_commit(self) -> float:
        return 1000.0 * self.seconds / max(self.commits, 1)


def baseline_measure(*, source: Path, replay: ReplayRange, scratch: Path) -> Baseline:
    """Clone ``source`` at ``replay.base`` into ``scratch`` (removed afterwards) and time the loop.

    Raises:
        GitReplayError: a git command failed.
    """
    if scratch.exists():
        shutil.rmtree(scratch)
    try:
        git(None, "clone", "--quiet", "--no-local", "--no-checkout", "--", str(source), str(scratch))
        git(scratch, "checkout", "--quiet", "-B", "replay-check-baseline", replay.base)
        started = time.perf_counter()
        for commit in replay.commits:
            git(scratch, "read-tree", "-u", "--reset", commit)
            git(scratch, "-c", "gc.auto=0", "commit", "--quiet", "--allow-empty", "--allow-empty-message",
                "--no-verify", "-C", commit, extra_env=_COMMITTER)
        seconds = time.perf_counter() - started
        matches = same_tree_content(source, tree_of(source, replay.tip), scratch, tree_of(scratch, "HEAD"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Baseline(commits=len(replay.commits), seconds=seconds, tree_matches=matches)
