"""A developer left uncommitted edits in the repository the run writes to. The git adapter
refuses to commit on top of them: it would either sweep foreign edits into a Ratchet commit or
overwrite them. Nothing is written; the edit stays; the drift shows in observe()."""

from __future__ import annotations

import pytest

from runtime.errors import PreconditionFailedError
from tests.adapters.support import Env, git


@pytest.mark.parametrize("edit", ["modified", "untracked", "staged"])
def test_it_refuses_to_write_over_uncommitted_changes(git_env: Env, edit: str) -> None:
    head = git(git_env.path, "rev-parse", "HEAD")
    if edit == "untracked":
        (git_env.path / "scratch.txt").write_text("mine\n")
    else:
        (git_env.path / "src" / "app.py").write_text("print('mine')\n")
        if edit == "staged":
            git(git_env.path, "add", "src/app.py")
    status = git(git_env.path, "status", "--porcelain")

    with pytest.raises(PreconditionFailedError):
        git_env.execute(git_env.write("notes/todo.txt", b"ship it\n"), "key-1")

    assert git(git_env.path, "rev-parse", "HEAD") == head
    assert git(git_env.path, "status", "--porcelain") == status
    assert git_env.adapter.lookup_receipt("key-1") is None


def test_ignored_files_are_not_drift(git_env: Env) -> None:
    git_env.execute(git_env.write(".gitignore", b"*.log\n"), "key-ignore")
    before = git_env.adapter.observe()

    (git_env.path / "debug.log").write_text("noise\n")

    assert git_env.adapter.observe().state_fingerprint == before.state_fingerprint
    git_env.execute(git_env.write("notes/todo.txt", b"ship it\n"), "key-1")
    assert (git_env.path / "debug.log").read_text() == "noise\n"
