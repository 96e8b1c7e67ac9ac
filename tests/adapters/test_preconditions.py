"""A planner proposes a write the current state cannot take: deleting a file that is not there,
writing over a directory or beneath a file, or (git) over an ignored local file the checkout
would silently destroy. The adapter refuses before its commit point; nothing is written and the key
stays free."""

from __future__ import annotations

import pytest

from runtime.errors import PreconditionFailedError
from tests.adapters.support import Env


def test_it_refuses_writes_the_current_state_cannot_take(env: Env) -> None:
    before = env.adapter.observe()

    for action in (env.delete("missing.txt"), env.write("src", b"not a dir\n"),
                   env.write("README.md/inner", b"under a file\n")):
        with pytest.raises(PreconditionFailedError):
            env.execute(action, "key-1")
        with pytest.raises(PreconditionFailedError):
            env.adapter.predict_post_state(action, blobs=env.blobs)

    after = env.adapter.observe()
    assert (after.version, after.state_fingerprint) == (before.version, before.state_fingerprint)
    assert env.adapter.lookup_receipt("key-1") is None
    ok = env.execute(env.write("notes/ok.txt", b"ok\n"), "key-1")
    assert ok.idempotency_key == "key-1"


def test_git_refuses_to_write_over_an_ignored_file(git_env: Env) -> None:
    git_env.execute(git_env.write(".gitignore", b"*.log\n"), "key-ignore")
    (git_env.path / "build.log").write_text("local build output\n")
    head = git_env.adapter.observe().version

    with pytest.raises(PreconditionFailedError):
        git_env.execute(git_env.write("build.log", b"from the run\n"), "key-1")

    assert git_env.adapter.observe().version == head
    assert (git_env.path / "build.log").read_text() == "local build output\n"
