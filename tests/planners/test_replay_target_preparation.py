"""Story: the runner prepares a replay target as a fresh clone at the range's base.

It creates the target only when nothing is there (or an empty directory), never touches an
existing non-empty one, and never leaves a half-made clone behind when something fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.errors import GitReplayError, PlannerError, ReplayTargetNotEmptyError
from runtime.planners.factory import build_planner
from runtime.planners.git_history.replay_target import clone_at_base, prepare_target
from runtime.taskspec import load_task_spec
from tests.planners.gitrepo import FIXTURES, History, git


def test_it_clones_into_an_empty_directory(replay_task: Path, history: History) -> None:
    spec = load_task_spec(replay_task)
    target = spec.resolve_target()
    target.mkdir()

    base = prepare_target(spec, target)

    assert base == history.root
    assert git(target, "rev-parse", "HEAD").strip() == history.root
    assert git(target, "status", "--porcelain") == ""
    assert git(target, "cat-file", "-t", history.tip).strip() == "commit"


def test_it_refuses_a_target_that_is_not_empty(replay_task: Path) -> None:
    spec = load_task_spec(replay_task)
    target = spec.resolve_target()
    target.mkdir()
    (target / "precious.txt").write_text("someone's work\n")

    with pytest.raises(ReplayTargetNotEmptyError):
        build_planner(spec).prepare_environment(target)

    assert [p.name for p in target.iterdir()] == ["precious.txt"]


def test_it_refuses_a_target_that_is_a_file(replay_task: Path) -> None:
    spec = load_task_spec(replay_task)
    target = spec.resolve_target()
    target.write_text("not a directory\n")

    with pytest.raises(ReplayTargetNotEmptyError):
        prepare_target(spec, target)
    assert target.read_text() == "not a directory\n"


def test_it_leaves_nothing_behind_when_the_checkout_fails(tmp_path: Path, history: History) -> None:
    target = tmp_path / "target"

    with pytest.raises(GitReplayError):
        clone_at_base(source=history.path, base="0" * 40, target=target)

    assert not target.exists()
    assert list(tmp_path.iterdir()) == [], "the staging clone must be removed"


def test_it_does_nothing_when_the_spec_asks_for_no_setup(tmp_path: Path, history: History) -> None:
    text = (FIXTURES / "git_replay.toml").read_text().replace('setup = "clone-at-base"',
                                                             'setup = "none"')
    (tmp_path / "task.toml").write_text(text)
    (tmp_path / "source").symlink_to(history.path, target_is_directory=True)
    spec = load_task_spec(tmp_path / "task.toml")

    build_planner(spec).prepare_environment(spec.resolve_target())

    assert not spec.resolve_target().exists()


def test_it_only_prepares_targets_for_replay_tasks() -> None:
    spec = load_task_spec(FIXTURES / "scripted.toml")

    with pytest.raises(PlannerError):
        prepare_target(spec, Path("unused"))
