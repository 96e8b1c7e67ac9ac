"""Read-only ``git`` queries the replay check makes on the source and the replayed target.

The check audits the code under test, so it reads both repositories with plain ``git`` commands
of its own, never through the git adapter or the planner. ``git`` runs with a neutral
environment (no system or global config, no prompts, C locale, no optional locks, no inherited
``GIT_*`` variables), so a user's configuration cannot change what the check sees.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from runtime.errors import GitReplayError

TRAILER_KEY = "Idempotency-Key"
"""The trailer every replayed commit carries (``runtime.adapters.git.adapter``); read here with git itself."""

WHOLE_HISTORY = "whole"
"""Range meaning every first-parent commit after the root commit (the root is the clone's base)."""

_TIMEOUT_SECONDS = 600.0


def git_env() -> dict[str, str]:
    """The environment every ``git`` call of the check runs with (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
        "LC_ALL": "C",
    })
    return env


def git(repo: Path | None, *args: str, extra_env: dict[str, str] | None = None) -> str:
    """Run ``git -C repo ARGS`` and return its stdout decoded as UTF-8 (replacing bad bytes).

    Args:
        extra_env: variables added to :func:`git_env` (e.g. a committer identity).

    Raises:
        GitReplayError: git failed or timed out.
    """
    argv = ["git", *(["-C", str(repo)] if repo is not None else []), *args]
    env = {**git_env(), **(extra_env or {})}
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, timeout=_TIMEOUT_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        raise GitReplayError(f"git {args[0]} timed out after {_TIMEOUT_SECONDS:.0f} s") from None
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitReplayError(f"git {args[0]} failed ({proc.returncode}): {detail[0] if detail else ''}",
                             repository=str(repo))
    return proc.stdout.decode("utf-8", "replace")


@dataclass(frozen=True)
class ReplayRange:
    """The source commits a replay must re-create.

    Attributes:
        range: the range given to the planner, always pinned as ``"<base sha>..<tip sha>"`` so a
            source whose HEAD moves during the check cannot change what is replayed.
        base: the commit the target is cloned at (not replayed).
        tip: the last commit replayed.
        commits: the first-parent commits after ``base`` up to ``tip``, oldest first.
    """

    range: str
    base: str
    tip: str
    commits: tuple[str, ...]


def _rev(repo: Path, rev: str) -> str:
    return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()


def replay_range(source: Path, range_: str = WHOLE_HISTORY) -> ReplayRange:
    """Resolve ``range_`` in ``source`` the way the git-history planner reads it.

    ``"whole"`` is every first-parent commit of HEAD after its first-parent root (the root is
    the base the target is cloned at); ``"last:N"`` the last N of HEAD; ``"A..B"`` the ones after
    A up to B.

    Raises:
        GitReplayError: unknown revision, a malformed or empty range.
    """
    if range_ == WHOLE_HISTORY:
        line = git(source, "rev-list", "--first-parent", "HEAD").split()
        if len(line) < 2:
            raise GitReplayError("the whole history needs at least two first-parent commits",
                                 repository=str(source))
        tip, base = line[0], line[-1]
        return ReplayRange(range=f"{base}..{tip}", base=base, tip=tip, commits=tuple(reversed(line[:-1])))
    last = re.fullmatch(r"last:(\d+)", range_)
    if last:
        count = int(last.group(1))
        line = git(source, "rev-list", "--first-parent", f"--max-count={count + 1}", "HEAD").split()
        if count < 1 or len(line) < count + 1:
            raise GitReplayError(f"range {range_} needs {count + 1} first-parent commits", repository=str(source))
        base, tip = line[-1], line[0]
        return ReplayRange(range=f"{base}..{tip}", base=base, tip=tip, commits=tuple(reversed(line[:-1])))
    base_rev, sep, tip_rev = range_.partition("..")
    if not sep or not base_rev or not tip_rev or tip_rev.startswith("."):
        raise GitReplayError(f"range {range_!r:.100} must be 'whole', 'last:N' or 'A..B'")
    base, tip = _rev(source, base_rev), _rev(source, tip_rev)
    commits = git(source, "rev-list", "--first-parent", "--reverse", f"{base}..{tip}").split()
    if not commits:
        raise GitReplayError(f"range {range_!r:.100} holds no commits", repository=str(source))
    return ReplayRange(range=f"{base}..{tip}", base=base, tip=tip, commits=tuple(commits))


def tree_of(repo: Path, rev: str) -> str:
    """The tree id of ``rev``."""
    return git(repo, "rev-parse", f"{rev}^{{tree}}").strip()


def same_tree_content(source: Path, source_tree: str, target: Path, target_tree: str) -> bool:
    """Whether two trees list the same entries (mode, type, object id, path), recursively.

    Tree ids differ while the content is equal when the source holds non-canonical tree objects
    that current git never writes, e.g. a zero-padded ``040000`` mode from git before 1.5: a
    replay rebuilds such trees canonically. ``ls-tree`` prints every mode canonically, so
    comparing its listings compares what was stored, not how old git spelled it. Subtree entries
    are left out (no ``-t``): a subtree the commit changed is rewritten canonically too, so its
    id may differ while every file below it is equal.
    """
    if source_tree == target_tree:
        return True
    listing = ("ls-tree", "-r", "-z", "--full-tree")
    return git(source, *listing, source_tree) == git(target, *listing, target_tree)


@dataclass(frozen=True)
class TargetCommit:
    """One commit on the target's first-parent line after the base: id, tree and key trailers."""

    commit: str
    tree: str
    keys: tuple[str, ...]


def first_parent_trees(repo: Path, base: str, tip: str) -> list[tuple[str, str]]:
    """``(commit, tree)`` of the first-parent commits after ``base`` up to ``tip``, oldest first."""
    out = git(repo, "log", "--first-parent", "--reverse", "--format=%H %T", f"{base}..{tip}")
    return [(c, t) for c, t in (line.split() for line in out.splitlines() if line.strip())]


def target_commits(target: Path, base: str) -> list[TargetCommit]:
    """The target's commits after ``base`` on HEAD's first-parent line with their key trailers,
    oldest first. Read with ``git log``'s own trailer parser, as any git user would."""
    out = git(target, "log", "--first-parent", "--reverse",
              f"--format=%H%x1f%T%x1f%(trailers:key={TRAILER_KEY},valueonly,separator=%x1d)%x1e",
              f"{base}..HEAD")
    found = []
    for record in out.split("\x1e"):
        record = record.strip("\n")
        if not record:
            continue
        commit, tree, keys = record.split("\x1f")
        values = tuple(k.strip() for k in keys.split("\x1d") if k.strip())
        found.append(TargetCommit(commit=commit.strip(), tree=tree.strip(), keys=values))
    return found


def commits_between(repo: Path, base: str, tip: str = "HEAD") -> int:
    """Commits reachable from ``tip`` and not from ``base``, through every parent (not only the
    first): more than the first-parent count means commits were merged in beside the replay."""
    return int(git(repo, "rev-list", "--count", f"{base}..{tip}").strip())
