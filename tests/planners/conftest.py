"""Fixtures for the planner stories: a real source repository with a varied history."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.planners.gitrepo import FIXTURES, History, build_history


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """A source repository shared (read-only) by the stories of one module."""
    return build_history(tmp_path_factory.mktemp("history") / "source")


@pytest.fixture
def replay_task(tmp_path: Path, history: History) -> Path:
    """The git replay fixture task, copied next to a ``source`` link to the shared history."""
    shutil.copy(FIXTURES / "git_replay.toml", tmp_path / "task.toml")
    (tmp_path / "source").symlink_to(history.path, target_is_directory=True)
    return tmp_path / "task.toml"
