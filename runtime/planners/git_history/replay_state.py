"""The git-history planner's pinned state, as the checkpoint holds it: constant size.

``{"kind": "git-history", "source", "range", "base", "tip", "count", "commits_digest"}``, fixed
at run creation so a resume never depends on where the source's HEAD points later (DESIGN.md
section 3, the plan cursor and input fingerprints). The commit list itself is not in the state:
a checkpoint must not grow with the length of what a run replays (DESIGN.md section 3.1), and a
whole history of thousands of commits would otherwise be re-signed at every commit. Between two
pinned commit ids the first-parent list is immutable, so :func:`replay_commits` derives it again
with ``git rev-list --first-parent base..tip`` and fails closed unless it has exactly the pinned
count and digest. Imports nothing from Django.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.errors import PlannerStateError
from runtime.planners.git_history.source import run_git

KIND = "git-history"
_OID_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
# Derived lists are immutable for a (source, base, tip, digest), so one process derives each once.
_DERIVED: dict[tuple[str, str, str, str], list[str]] = {}


@dataclass(frozen=True)
class ReplayPlan:
    """The pinned plan: replay the ``count`` first-parent commits after ``base`` up to ``tip``."""

    source: Path
    base: str
    tip: str
    count: int
    commits_digest: str


def commits_digest(commits: list[str]) -> str:
    """``sha256:<hex>`` over the commit ids, oldest first, one per line."""
    return "sha256:" + hashlib.sha256("\n".join(commits).encode("ascii")).hexdigest()


def replay_state(*, source: Path, range_: str, base: str, tip: str, commits: list[str]) -> dict[str, Any]:
    """The planner state pinning ``commits`` (oldest first, ending at ``tip``) after ``base``."""
    return {"kind": KIND, "source": str(source), "range": range_, "base": base, "tip": tip,
            "count": len(commits), "commits_digest": commits_digest(commits)}


def read_replay_state(state: Mapping[str, Any]) -> ReplayPlan:
    """The :class:`ReplayPlan` of a git-history planner state, shape-checked.

    Raises:
        PlannerStateError: the state was not made by this planner or is malformed.
    """
    if state.get("kind") != KIND:
        raise PlannerStateError("planner state was not made by the git-history planner")
    state = _from_legacy(state)
    source, base, tip, count, digest = (state.get(k) for k in ("source", "base", "tip", "count", "commits_digest"))
    if (
        not isinstance(source, str)
        or not isinstance(base, str) or not _OID_RE.match(base)
        or not isinstance(tip, str) or not _OID_RE.match(tip)
        or isinstance(count, bool) or not isinstance(count, int) or count < 1
        or not isinstance(digest, str) or not _DIGEST_RE.match(digest)
    ):
        raise PlannerStateError("git-history planner state is malformed")
    return ReplayPlan(source=Path(source), base=base, tip=tip, count=count, commits_digest=digest)


def _from_legacy(state: Mapping[str, Any]) -> Mapping[str, Any]:
    # Runs created before the state became constant-size pinned the whole list; they restore and
    # continue with the same plan (the list must still end at the pinned tip).
    commits = state.get("commits")
    if "count" in state or not isinstance(commits, list) or not commits:
        return state
    if not all(isinstance(c, str) and _OID_RE.match(c) for c in commits) or commits[-1] != state.get("tip"):
        raise PlannerStateError("git-history planner state is malformed")
    return {**state, "count": len(commits), "commits_digest": commits_digest(commits)}


def replay_commits(plan: ReplayPlan) -> list[str]:
    """The pinned commit list, oldest first, derived again from the source and checked.

    Raises:
        GitReplayError: the source cannot be read.
        PlannerStateError: the derived list is not the pinned one (the source was rewritten or
            is another repository): the run must not replay a different history.
    """
    key = (str(plan.source), plan.base, plan.tip, plan.commits_digest)
    cached = _DERIVED.get(key)
    if cached is not None:
        return cached
    out = run_git(plan.source, "rev-list", "--first-parent", "--reverse", f"{plan.base}..{plan.tip}")
    commits = out.decode("ascii").split()
    if len(commits) != plan.count or commits_digest(commits) != plan.commits_digest or commits[-1] != plan.tip:
        raise PlannerStateError(
            f"the source's first-parent commits from {plan.base[:12]} to {plan.tip[:12]} are not the "
            f"{plan.count} pinned at run creation"
        )
    _DERIVED[key] = commits
    return commits
