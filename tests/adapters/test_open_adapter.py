"""The engine opens adapters by kind and target from a task spec; a wrong kind or a target that
is not a usable environment fails with a typed error before anything is touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.adapters.base import Adapter
from runtime.adapters.factory import open_adapter
from runtime.adapters.git.adapter import GitAdapter
from runtime.adapters.workspace.adapter import WorkspaceAdapter
from runtime.errors import AdapterError, AdapterTargetError, UnknownAdapterError
from tests.adapters.support import git, make_repo


def test_it_opens_both_kinds_and_they_follow_the_protocol(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    repo = make_repo(tmp_path / "repo")

    workspace = open_adapter("workspace", tmp_path / "ws")
    repository = open_adapter("git", str(repo))

    assert isinstance(workspace, WorkspaceAdapter) and isinstance(workspace, Adapter)
    assert isinstance(repository, GitAdapter) and isinstance(repository, Adapter)
    assert (workspace.kind, workspace.adapter_version) == ("workspace", "ratchet-workspace/1")
    assert (repository.kind, repository.adapter_version) == ("git", "ratchet-git/1")


def test_it_rejects_an_unknown_kind(tmp_path: Path) -> None:
    with pytest.raises(UnknownAdapterError):
        open_adapter("ftp", tmp_path)


@pytest.mark.parametrize("kind", ["workspace", "git"])
def test_it_rejects_a_missing_or_non_directory_target(tmp_path: Path, kind: str) -> None:
    (tmp_path / "file.txt").write_text("not a directory\n")

    for target in (tmp_path / "missing", tmp_path / "file.txt", ""):
        with pytest.raises(AdapterTargetError):
            open_adapter(kind, target)


def test_git_rejects_what_is_not_the_top_of_a_non_bare_repository_with_commits(tmp_path: Path
                                                                              ) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    repo = make_repo(tmp_path / "repo")
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")

    for target in (plain, repo / "src", bare, empty):
        with pytest.raises(AdapterTargetError):
            GitAdapter(target)
    assert not (plain / ".ratchet").exists()


def test_errors_are_typed_adapter_errors() -> None:
    assert issubclass(AdapterTargetError, AdapterError)
    assert issubclass(UnknownAdapterError, AdapterError)
