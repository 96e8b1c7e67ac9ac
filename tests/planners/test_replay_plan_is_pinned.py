"""Story: the source repository moves on while a replay run is paused.

The planner pinned base, tip and commit list at run creation, so a resumed run proposes exactly
the same actions and the verifier compares with the pinned tip -- a resume never depends on
where the source's HEAD points now.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from runtime.errors import PlannerStateError
from runtime.planners.base import Done
from runtime.planners.git_history.planner import GitHistoryPlanner
from runtime.planners.git_history.replay_state import read_replay_state, replay_commits
from runtime.planners.git_history.replay_target import clone_at_base
from runtime.taskspec import TaskSpec
from runtime.verifiers.builtin import verify
from tests.planners.gitrepo import BlobStore, apply_commit, build_history, git, observation


def _spec(source: Path, target: Path) -> TaskSpec:
    return TaskSpec.from_json({
        "task": {"id": "replay", "version": "1"},
        "policy": {"id": "p", "version": "1", "allowed_actions": ["commit"],
                   "allowed_paths": ["**"],
                   "budgets": {"proposals": 20, "steps": 20, "wall_seconds": 60}},
        "environment": {"adapter": "git", "target": str(target), "setup": "clone-at-base"},
        "planner": {"kind": "git-history", "source": str(source), "range": "last:8"},
        "verifier": {"kind": "tree-equals-source"},
    })


def test_it_replays_the_pinned_commits_after_the_source_moves(tmp_path: Path) -> None:
    history = build_history(tmp_path / "source")
    started = GitHistoryPlanner(source=history.path, range="last:8")
    state = started.init_state()
    before = [started.propose(cursor=i, planner_state=state, observation=observation(),
                              put_blob=BlobStore().put) for i in range(9)]

    (history.path / "late.txt").write_text("committed after the run started\n")
    git(history.path, "add", "late.txt")
    git(history.path, "commit", "-q", "-m", "Late commit", GIT_AUTHOR_NAME="Late",
        GIT_AUTHOR_EMAIL="late@example.org")

    resumed = GitHistoryPlanner(source=history.path, range="last:8")
    after = [resumed.propose(cursor=i, planner_state=state, observation=observation(),
                             put_blob=BlobStore().put) for i in range(9)]
    assert after == before
    assert isinstance(after[-1], Done)
    assert resumed.init_state()["tip"] != state["tip"], "a fresh run would pick up the new commit"


def test_it_verifies_against_the_pinned_tip_not_the_moved_head(tmp_path: Path) -> None:
    history = build_history(tmp_path / "source")
    target = tmp_path / "target"
    planner = GitHistoryPlanner(source=history.path, range="last:8")
    state = planner.init_state()
    clone_at_base(source=history.path, base=str(state["base"]), target=target)
    blobs = BlobStore()
    for cursor in range(8):
        action = planner.propose(cursor=cursor, planner_state=state, observation=observation(),
                                 put_blob=blobs.put)
        apply_commit(target, action, blobs)

    (history.path / "late.txt").write_text("moved on\n")
    git(history.path, "add", "late.txt")
    git(history.path, "commit", "-q", "-m", "Late commit", GIT_AUTHOR_NAME="Late",
        GIT_AUTHOR_EMAIL="late@example.org")

    spec = _spec(history.path, target)
    pinned = verify(spec, observation(), target, planner_state=state)
    assert pinned.passed, pinned.detail
    unpinned = verify(spec, observation(), target)
    assert not unpinned.passed and "differs from source tip tree" in unpinned.detail


def _empty_commits(repo: Path, count: int) -> Path:
    """A repository of ``count`` empty commits on ``main`` (enough for range arithmetic)."""
    repo.mkdir()
    run = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*run, "init", "-q", "-b", "main"], check=True)
    for i in range(count):
        subprocess.run([*run, "commit", "-q", "--allow-empty", "-m", f"c{i}"], check=True)
    return repo


def test_it_keeps_the_planner_state_the_same_size_whatever_the_range(tmp_path: Path) -> None:
    """A whole history must not make every checkpoint larger (DESIGN.md section 3.1)."""

    repo = _empty_commits(tmp_path / "src", 40)
    small = GitHistoryPlanner(source=repo, range="last:2").init_state()
    large = GitHistoryPlanner(source=repo, range="last:39").init_state()
    assert len(json.dumps(large)) - len(json.dumps(small)) < 8
    assert len(replay_commits(read_replay_state(large))) == 39


def test_it_refuses_a_source_whose_history_was_rewritten(tmp_path: Path) -> None:

    repo = _empty_commits(tmp_path / "src", 4)
    state = GitHistoryPlanner(source=repo, range="last:3").init_state()
    tampered = {**state, "count": 2}
    with pytest.raises(PlannerStateError, match="not the 2 pinned"):
        replay_commits(read_replay_state(tampered))


def test_it_restores_a_state_pinned_before_the_state_became_constant_size(tmp_path: Path) -> None:

    repo = _empty_commits(tmp_path / "src", 4)
    state = GitHistoryPlanner(source=repo, range="last:3").init_state()
    commits = replay_commits(read_replay_state(state))
    legacy = {k: v for k, v in state.items() if k not in ("count", "commits_digest")} | {"commits": commits}
    assert read_replay_state(legacy) == read_replay_state(state)
