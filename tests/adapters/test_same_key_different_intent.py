"""A buggy planner reuses a key for different parameters. The adapter must not report success for
the new parameters: it returns the ORIGINAL receipt, whose intent digest differs, and writes
nothing -- the engine compares the digests and freezes the run (DESIGN.md sections 5-7: "same
key with different parameters returning success")."""

from __future__ import annotations

from tests.adapters.support import Env, effects_for_key


def test_same_key_with_different_parameters_returning_success(env: Env) -> None:
    original = env.write("notes/todo.txt", b"ship it\n")
    receipt = env.execute(original, "key-1")
    before = env.adapter.observe()

    changed = env.write("notes/todo.txt", b"ship it twice\n")
    answer = env.execute(changed, "key-1")

    assert answer == receipt
    assert answer.intent_digest == original.intent_digest()
    assert answer.intent_digest != changed.intent_digest()
    assert (env.path / "notes" / "todo.txt").read_bytes() == b"ship it\n"
    after = env.adapter.observe()
    assert (after.version, after.state_fingerprint) == (before.version, before.state_fingerprint)
    assert effects_for_key(env, "key-1") == 1


def test_a_different_action_kind_under_the_same_key_writes_nothing(env: Env) -> None:
    receipt = env.execute(env.write("notes/todo.txt", b"ship it\n"), "key-1")

    answer = env.execute(env.delete("README.md"), "key-1")

    assert answer == receipt
    assert (env.path / "README.md").exists()
