"""Story: the tree-equals-source verifier refuses anything but an exact, clean replay.

A partial replay, an out-of-band edit, an untracked file or a target without commits all fail
with a reason an operator can read; only the exact tip tree on a clean work tree passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.errors import VerifierError
from runtime.planners.factory import build_planner
from runtime.taskspec import TaskSpec, load_task_spec
from runtime.verifiers import verify
from tests.planners.gitrepo import BlobStore, History, apply_commit, git, observation


def _replay(spec: TaskSpec, commits: int) -> tuple[Path, dict]:
    target = spec.resolve_target()
    planner = build_planner(spec)
    planner.prepare_environment(target)
    state = planner.init_state()
    blobs = BlobStore()
    for cursor in range(commits):
        action = planner.propose(cursor=cursor, planner_state=state, observation=observation(),
                                 put_blob=blobs.put)
        apply_commit(target, action, blobs)
    return target, state


def test_it_fails_a_partial_replay(replay_task: Path) -> None:
    spec = load_task_spec(replay_task)
    target, state = _replay(spec, 7)

    outcome = verify(spec, observation("v7"), target, planner_state=state)

    assert not outcome.passed
    assert "differs from source tip tree" in outcome.detail and "v7" in outcome.detail


def test_it_fails_a_matching_tree_with_an_edited_work_tree(replay_task: Path) -> None:
    spec = load_task_spec(replay_task)
    target, state = _replay(spec, 8)
    (target / "README.md").write_text("edited out of band\n")
    (target / "stray.txt").write_text("untracked\n")

    outcome = verify(spec, observation(), target, planner_state=state)

    assert not outcome.passed
    assert "not clean" in outcome.detail
    assert "README.md" in outcome.detail and "stray.txt" in outcome.detail


def test_it_fails_a_target_without_commits(replay_task: Path) -> None:
    spec = load_task_spec(replay_task)
    target = spec.resolve_target()
    target.mkdir()
    git(target, "init", "-q")

    outcome = verify(spec, observation(), target)

    assert not outcome.passed and "no readable HEAD" in outcome.detail


def test_it_raises_when_the_source_is_gone(replay_task: Path, history: History) -> None:
    spec = load_task_spec(replay_task)
    target, state = _replay(spec, 8)
    (replay_task.parent / "source").unlink()

    with pytest.raises(VerifierError):
        verify(spec, observation(), target, planner_state=state)
