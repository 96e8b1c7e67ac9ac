"""A worker retries a write it already made: the adapter hands back the original receipt and
makes no second commit or file write (DESIGN.md section 5: same key and same intent returns the
original receipt)."""

from __future__ import annotations

from tests.adapters.support import Env, effects_for_key, git


def test_it_returns_the_original_receipt_without_a_second_effect(env: Env) -> None:
    action = env.write("notes/todo.txt", b"ship it\n")
    first = env.execute(action, "key-1")
    after_first = env.adapter.observe()

    second = env.execute(action, "key-1")

    assert second == first
    assert second.fingerprint() == first.fingerprint()
    again = env.adapter.observe()
    assert (again.version, again.state_fingerprint) == (after_first.version,
                                                        after_first.state_fingerprint)
    assert effects_for_key(env, "key-1") == 1
    assert len(env.adapter.receipts()) == 1


def test_it_finds_the_receipt_from_a_fresh_adapter_instance(env: Env) -> None:
    action = env.write("notes/todo.txt", b"ship it\n")
    first = env.execute(action, "key-1")

    other = env.reopen()

    assert other.lookup_receipt("key-1") == first
    assert env.execute(action, "key-1", adapter=other) == first
    assert effects_for_key(env, "key-1") == 1


def test_it_makes_no_git_commit_on_the_retry(git_env: Env) -> None:
    action = git_env.write("notes/todo.txt", b"ship it\n")
    git_env.execute(action, "key-1")
    head = git(git_env.path, "rev-parse", "HEAD").strip()
    count = git(git_env.path, "rev-list", "--count", "HEAD").strip()

    git_env.execute(action, "key-1")

    assert git(git_env.path, "rev-parse", "HEAD").strip() == head
    assert git(git_env.path, "rev-list", "--count", "HEAD").strip() == count


def test_a_delete_retried_does_not_fail_on_the_missing_file(env: Env) -> None:
    """The retry is answered from the receipt store before the file's absence is looked at."""
    action = env.delete("src/app.py")
    first = env.execute(action, "key-del")

    assert env.execute(action, "key-del") == first
    assert not (env.path / "src" / "app.py").exists()
