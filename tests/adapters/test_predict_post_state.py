"""Before a write runs, the engine records the one state it may produce; after the write (or a
crash after it) the observed fingerprint must be exactly that (DESIGN.md section 5: the one state
derivable deterministically from the single pending write). Predicting changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.core.checkpoint import Action
from tests.adapters.support import Env, git, journal_records


def _write_new(env: Env) -> Action:
    return env.write("docs/guide/intro.md", b"# Intro\n")


def _overwrite(env: Env) -> Action:
    return env.write("README.md", b"# demo, updated\n", executable=True)


def _delete(env: Env) -> Action:
    return env.delete("src/app.py")


@pytest.mark.parametrize("make_action", [_write_new, _overwrite, _delete])
def test_predict_post_state_equals_the_fingerprint_observed_after_execute(env: Env, make_action
                                                                           ) -> None:
    action = make_action(env)
    predicted = env.adapter.predict_post_state(action, blobs=env.blobs)

    receipt = env.execute(action, "key-1")

    observed = env.adapter.observe()
    assert observed.state_fingerprint == predicted
    assert observed.version == receipt.environment_version_after


def test_a_git_commit_action_is_predicted_too(git_env: Env) -> None:
    action = Action(kind="commit", params={
        "message": "Rework the app\n\nTwo files at once.", "author_name": "Ada Author",
        "author_email": "ada@example.com", "author_date": "2026-01-02T03:04:05+01:00",
        "changes": [
            {"op": "write", "path": "src/app.py", "content": git_env.blobs.put(b"print('v2')\n"),
             "executable": False},
            {"op": "delete", "path": "run.sh"},
        ]})
    predicted = git_env.adapter.predict_post_state(action, blobs=git_env.blobs)

    git_env.execute(action, "key-1")

    assert git_env.adapter.observe().state_fingerprint == predicted


def _loose_objects(repo: Path) -> str:
    return git(repo, "count-objects", "-v")


def test_predicting_writes_nothing(env: Env) -> None:
    before = env.adapter.observe()
    git_objects = _loose_objects(env.path) if env.kind == "git" else None
    journal = journal_records(env.path) if env.kind == "workspace" else None
    action = env.write("docs/new.md", b"new\n")

    predicted = env.adapter.predict_post_state(action, blobs=env.blobs)
    env.adapter.dry_run_diff(action, blobs=env.blobs)

    after = env.adapter.observe()
    assert predicted != before.state_fingerprint
    assert (after.version, after.state_fingerprint) == (before.version, before.state_fingerprint)
    assert not (env.path / "docs").exists()
    if env.kind == "git":
        assert _loose_objects(env.path) == git_objects
    else:
        assert journal_records(env.path) == journal


def test_an_unchanged_write_predicts_the_same_content(env: Env) -> None:
    """Rewriting identical bytes leaves the content fingerprint as it was (version still moves)."""
    action = env.write("README.md", b"# demo\n")

    assert env.adapter.predict_post_state(action, blobs=env.blobs) == \
        env.adapter.observe().state_fingerprint
