"""A hostile or confused planner proposes paths outside the environment, into ``.git`` or the
adapter's journal, or through a symlink. Every one is refused with a typed error and nothing is
written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.core.checkpoint import Action
from runtime.errors import InvalidActionError, PathEscapeError
from tests.adapters.support import Env, commit_action

BAD_PATHS = [
    "/etc/passwd",
    "../outside.txt",
    "src/../../outside.txt",
    "./README.md",
    "src//app.py",
    "src/",
    "",
    ".git/config",
    ".GIT/hooks/post-checkout",
    "vendor/.git/config",
    "a\\b.txt",
    "line\nbreak.txt",
]


def _unchanged(env: Env, before) -> None:
    after = env.adapter.observe()
    assert (after.version, after.state_fingerprint) == (before.version, before.state_fingerprint)
    assert env.adapter.receipts() == []


@pytest.mark.parametrize("path", BAD_PATHS)
def test_it_rejects_paths_that_escape_the_environment(env: Env, path: str) -> None:
    before = env.adapter.observe()
    for action in (env.write(path, b"pwned\n"), env.delete(path)):
        with pytest.raises(PathEscapeError):
            env.execute(action, "key-1")
        with pytest.raises(PathEscapeError):
            env.adapter.predict_post_state(action, blobs=env.blobs)
    _unchanged(env, before)


@pytest.mark.parametrize("path", [".ratchet/journal.jsonl", ".Ratchet/fence", ".ratchet",
                                  "src/.ratchet-tmp-123"])
def test_it_rejects_writes_into_the_workspace_journal(workspace_env: Env, path: str) -> None:
    before = workspace_env.adapter.observe()

    with pytest.raises(PathEscapeError):
        workspace_env.execute(workspace_env.write(path, b"forged\n"), "key-1")

    _unchanged(workspace_env, before)


def test_it_refuses_to_write_through_a_symlinked_directory(workspace_env: Env,
                                                           tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, workspace_env.path / "escape")
    before = workspace_env.adapter.observe()

    with pytest.raises(PathEscapeError):
        workspace_env.execute(workspace_env.write("escape/evil.txt", b"pwned\n"), "key-1")

    assert list(outside.iterdir()) == []
    _unchanged(workspace_env, before)


def test_it_refuses_to_replace_or_delete_a_symlink(workspace_env: Env, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("keep\n")
    os.symlink(secret, workspace_env.path / "link.txt")

    with pytest.raises(PathEscapeError):
        workspace_env.execute(workspace_env.write("link.txt", b"pwned\n"), "key-1")
    with pytest.raises(PathEscapeError):
        workspace_env.execute(workspace_env.delete("link.txt"), "key-2")

    assert secret.read_text() == "keep\n"
    assert (workspace_env.path / "link.txt").is_symlink()


def test_git_refuses_to_write_through_a_tracked_symlink(git_env: Env, tmp_path: Path) -> None:
    """The fixture repository tracks ``escape -> ../outside``."""
    (tmp_path / "outside").mkdir()
    before = git_env.adapter.observe()

    for action in (git_env.write("escape/evil.txt", b"pwned\n"),
                   git_env.write("escape", b"not a link any more\n")):
        with pytest.raises(PathEscapeError):
            git_env.execute(action, "key-1")

    assert list((tmp_path / "outside").iterdir()) == []
    _unchanged(git_env, before)


def test_git_rejects_a_bad_path_inside_a_commit_action(git_env: Env) -> None:
    before = git_env.adapter.observe()
    action = commit_action(git_env, message="Sneaky", changes=[
        {"op": "write", "path": "ok.txt", "content": git_env.blobs.put(b"ok\n"), "executable": False},
        {"op": "write", "path": ".git/hooks/pre-commit", "content": git_env.blobs.put(b"x"),
         "executable": True},
    ])

    with pytest.raises(PathEscapeError):
        git_env.execute(action, "key-1")

    _unchanged(git_env, before)


def test_it_rejects_unknown_action_kinds_and_params(env: Env) -> None:
    content = env.blobs.put(b"x\n")
    for action in (
        Action(kind="run_shell", target="rm -rf /"),
        Action(kind="write_file", target="a.txt", params={"content": content, "mode": "0777"}),
        Action(kind="write_file", target="a.txt", params={"content": "md5:abc"}),
        Action(kind="write_file", target="a.txt", params={"content": content, "executable": "yes"}),
        Action(kind="delete_file", target="README.md", params={"force": True}),
    ):
        with pytest.raises(InvalidActionError):
            env.execute(action, "key-1")
    assert env.adapter.receipts() == []
