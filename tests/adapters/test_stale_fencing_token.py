"""A worker that lost its lease comes back with an old fencing token. The adapter rejects it and
writes nothing, because a newer lease holder has already written (DESIGN.md section 4,
Ownership: adapters reject tokens older than the newest they have seen)."""

from __future__ import annotations

import pytest

from runtime.errors import FencingTokenError
from tests.adapters.support import Env, effects_for_key, git


def test_it_rejects_a_stale_fencing_token_and_writes_nothing(env: Env) -> None:
    env.execute(env.write("notes/new-owner.txt", b"mine\n"), "key-new", token=5)
    before = env.adapter.observe()

    with pytest.raises(FencingTokenError) as caught:
        env.execute(env.write("notes/old-owner.txt", b"late\n"), "key-old", token=4)

    assert caught.value.context["newest_seen"] == 5
    assert caught.value.context["fencing_token"] == 4
    assert not (env.path / "notes" / "old-owner.txt").exists()
    after = env.adapter.observe()
    assert (after.version, after.state_fingerprint) == (before.version, before.state_fingerprint)
    assert env.adapter.lookup_receipt("key-old") is None
    assert effects_for_key(env, "key-old") == 0


def test_it_accepts_the_same_and_newer_tokens(env: Env) -> None:
    env.execute(env.write("a.txt", b"a\n"), "key-a", token=5)
    env.execute(env.write("b.txt", b"b\n"), "key-b", token=5)
    env.execute(env.write("c.txt", b"c\n"), "key-c", token=6)

    assert [r.fencing_token for r in env.adapter.receipts()] == [5, 5, 6]


def test_it_rejects_a_stale_token_even_for_a_key_it_already_holds(env: Env) -> None:
    action = env.write("a.txt", b"a\n")
    env.execute(action, "key-a", token=5)
    env.execute(env.write("b.txt", b"b\n"), "key-b", token=6)

    with pytest.raises(FencingTokenError):
        env.execute(action, "key-a", token=5)


def test_the_fence_survives_a_new_adapter_instance(env: Env) -> None:
    env.execute(env.write("a.txt", b"a\n"), "key-a", token=9)

    with pytest.raises(FencingTokenError):
        env.execute(env.write("b.txt", b"b\n"), "key-b", token=8, adapter=env.reopen())


def test_an_accepted_retry_raises_the_fence(env: Env) -> None:
    """A new lease holder reconciling an old key with its newer token fences the old holder out."""
    action = env.write("a.txt", b"a\n")
    env.execute(action, "key-a", token=3)
    env.execute(action, "key-a", token=8)

    with pytest.raises(FencingTokenError):
        env.execute(env.write("b.txt", b"b\n"), "key-b", token=7)
    assert not (env.path / "b.txt").exists()


def test_git_recovers_the_fence_from_history_when_the_fence_file_is_gone(git_env: Env) -> None:
    git_env.execute(git_env.write("a.txt", b"a\n"), "key-a", token=12)
    (git_env.path / ".git" / "ratchet-fence").unlink()
    head = git(git_env.path, "rev-parse", "HEAD")

    with pytest.raises(FencingTokenError) as caught:
        git_env.execute(git_env.write("b.txt", b"b\n"), "key-b", token=11)

    assert caught.value.context["newest_seen"] == 12
    assert git(git_env.path, "rev-parse", "HEAD") == head


def test_the_workspace_recovers_the_fence_from_its_journal(workspace_env: Env) -> None:
    workspace_env.execute(workspace_env.write("a.txt", b"a\n"), "key-a", token=12)
    (workspace_env.path / ".ratchet" / "fence").unlink()

    with pytest.raises(FencingTokenError):
        workspace_env.execute(workspace_env.write("b.txt", b"b\n"), "key-b", token=11)
