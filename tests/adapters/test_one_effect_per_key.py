"""An auditor counts effects in the adapter's own records: each idempotency key has exactly one
(DESIGN.md section 8: one idempotency key yields one business result). For git that is the
number of commits carrying the key's trailer."""

from __future__ import annotations

import pytest

from runtime.errors import DuplicateReceiptError
from tests.adapters.support import Env, commits_with_key, effects_for_key, git, run_child


def test_it_keeps_one_commit_per_key_after_repeated_execution(git_env: Env) -> None:
    actions = {f"key-{i}": git_env.write(f"notes/{i}.txt", f"note {i}\n".encode())
               for i in range(3)}
    for _ in range(3):
        for key, action in actions.items():
            git_env.execute(action, key)

    assert {key: commits_with_key(git_env.path, key) for key in actions} == {
        "key-0": 1, "key-1": 1, "key-2": 1}
    assert [r.idempotency_key for r in git_env.adapter.receipts()] == list(actions)


def test_it_keeps_one_effect_per_key_across_processes(env: Env) -> None:
    action = env.write("notes/todo.txt", b"ship it\n")
    receipts = set()
    for _ in range(3):
        done = run_child(env, action, "key-1")
        assert done.returncode == 0, done.stderr
        receipts.add(done.stdout.strip())

    assert len(receipts) == 1
    assert effects_for_key(env, "key-1") == 1


def test_it_refuses_to_pick_between_two_commits_carrying_one_key(git_env: Env) -> None:
    """Someone cherry-picked a Ratchet commit: the key now has two effects in history."""
    receipt = git_env.execute(git_env.write("notes/todo.txt", b"ship it\n"), "key-1")
    git(git_env.path, "rm", "-q", "notes/todo.txt")
    git(git_env.path, "commit", "-q", "-m", "Remove the note")
    git(git_env.path, "cherry-pick", receipt.receipt_id)
    assert commits_with_key(git_env.path, "key-1") == 2

    with pytest.raises(DuplicateReceiptError) as caught:
        git_env.adapter.lookup_receipt("key-1")

    assert caught.value.context["idempotency_key"] == "key-1"
    assert [r.idempotency_key for r in git_env.adapter.receipts()] == ["key-1", "key-1"]
    with pytest.raises(DuplicateReceiptError):
        git_env.execute(git_env.write("notes/todo.txt", b"ship it\n"), "key-1")
