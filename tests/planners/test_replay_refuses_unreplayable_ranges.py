"""Story: a replay range the planner cannot express as file writes fails when the run is created.

Submodules and symlinks are refused (not silently skipped) with an error naming the commit and
path; so are ranges whose base is off the first-parent line, ranges longer than the history,
empty ranges, missing sources and planner states that were not made by this planner.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.errors import (
    GitReplayError,
    GitReplayUnsupportedError,
    PlannerError,
    PlannerStateError,
)
from runtime.planners.git_history import GitHistoryPlanner
from tests.planners.gitrepo import BlobStore, History, git, observation


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "root", GIT_AUTHOR_NAME="A", GIT_AUTHOR_EMAIL="a@example.org")
    return repo


def test_it_refuses_a_range_with_a_submodule(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},vendor/lib")
    git(repo, "commit", "-q", "-m", "add submodule", GIT_AUTHOR_NAME="A",
        GIT_AUTHOR_EMAIL="a@example.org")

    with pytest.raises(GitReplayUnsupportedError, match="submodule 'vendor/lib'") as caught:
        GitHistoryPlanner(source=repo, range="last:1").init_state()
    assert caught.value.context["commit"] == git(repo, "rev-parse", "HEAD").strip()


def test_it_refuses_a_range_with_a_symlink(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    os.symlink("a.txt", repo / "link")
    git(repo, "add", "link")
    git(repo, "commit", "-q", "-m", "add link", GIT_AUTHOR_NAME="A",
        GIT_AUTHOR_EMAIL="a@example.org")

    with pytest.raises(GitReplayUnsupportedError, match="symlink 'link'"):
        GitHistoryPlanner(source=repo, range="last:1").init_state()


def test_it_refuses_a_base_off_the_first_parent_line(history: History) -> None:
    # The feature branch was merged in; its tip is not on main's first-parent line.
    with pytest.raises(GitReplayError, match="not on the first-parent line"):
        GitHistoryPlanner(source=history.path, range=f"{history.feature_tip}..main").init_state()


def test_it_needs_one_more_commit_than_it_replays(history: History) -> None:
    assert len(GitHistoryPlanner(source=history.path, range="last:8").init_state()["commits"]) == 8
    with pytest.raises(GitReplayError, match="needs 10 first-parent commits"):
        GitHistoryPlanner(source=history.path, range="last:9").init_state()


def test_it_refuses_an_empty_range(history: History) -> None:
    with pytest.raises(GitReplayError, match="holds no commits"):
        GitHistoryPlanner(source=history.path, range="main..main").init_state()


def test_it_refuses_an_unknown_revision(history: History) -> None:
    with pytest.raises(GitReplayError, match="is not a commit"):
        GitHistoryPlanner(source=history.path, range="nope..main").init_state()


def test_it_refuses_a_missing_source(tmp_path: Path) -> None:
    with pytest.raises(GitReplayError, match="does not exist"):
        GitHistoryPlanner(source=tmp_path / "gone", range="last:1").init_state()


@pytest.mark.parametrize("state", [
    {"kind": "scripted", "steps": 1},
    {"kind": "git-history", "source": "x", "base": "not-a-sha", "tip": "1" * 40,
     "commits": ["1" * 40]},
    {"kind": "git-history", "source": "x", "base": "0" * 40, "tip": "1" * 40,
     "commits": ["2" * 40]},
])
def test_it_refuses_a_planner_state_it_did_not_make(history: History, state: dict) -> None:
    planner = GitHistoryPlanner(source=history.path, range="last:1")

    with pytest.raises(PlannerStateError):
        planner.propose(cursor=0, planner_state=state, observation=observation(),
                        put_blob=BlobStore().put)


def test_it_refuses_a_negative_cursor(history: History) -> None:
    planner = GitHistoryPlanner(source=history.path, range="last:1")

    with pytest.raises(PlannerError):
        planner.propose(cursor=-1, planner_state=planner.init_state(),
                        observation=observation(), put_blob=BlobStore().put)
