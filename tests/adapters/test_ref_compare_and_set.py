"""A developer commits to the repository while a Ratchet write is between building its commit and
moving HEAD. The ref update is a compare-and-set on the old HEAD, so the developer's commit wins,
Ratchet commits nothing, and the key stays free (DESIGN.md section 4: commit by compare-and-set,
never by overwrite). The developer's commit is made by a real ``git`` process."""

from __future__ import annotations

import pytest

import runtime.adapters.git.adapter as git_adapter
from runtime.errors import ConcurrentWriteError
from tests.adapters.support import Env, commits_with_key, git


def test_it_commits_nothing_when_head_moves_under_the_write(
        git_env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write_commit = git_adapter.write_commit

    def commit_then_someone_commits(*args, **kwargs):
        sha = real_write_commit(*args, **kwargs)
        (git_env.path / "hotfix.txt").write_text("urgent\n")
        git(git_env.path, "add", "hotfix.txt")
        git(git_env.path, "commit", "-q", "-m", "Hotfix while Ratchet was writing")
        return sha

    monkeypatch.setattr(git_adapter, "write_commit", commit_then_someone_commits)
    hotfix_parent = git(git_env.path, "rev-parse", "HEAD").strip()

    with pytest.raises(ConcurrentWriteError) as caught:
        git_env.execute(git_env.write("notes/todo.txt", b"ship it\n"), "key-1")

    monkeypatch.undo()
    assert caught.value.retryable
    assert git(git_env.path, "log", "-1", "--format=%s|%P").strip() == \
        f"Hotfix while Ratchet was writing|{hotfix_parent}"
    assert commits_with_key(git_env.path, "key-1") == 0
    assert not (git_env.path / ".git" / "ratchet-sync.json").exists()
    assert git_env.adapter.lookup_receipt("key-1") is None
    assert git(git_env.path, "status", "--porcelain") == ""
