"""Story: the git adapter writes objects in-process and starts git children only for what the
operation journal guards (DESIGN.md section 5.5): counted, not timed."""

from __future__ import annotations

from runtime.adapters.git_process import PROCESSES_STARTED
from runtime.core.checkpoint import Action
from tests.adapters.support import Env, git


def _children(call) -> int:  # type: ignore[no-untyped-def]
    before = PROCESSES_STARTED[0]
    call()
    return PROCESSES_STARTED[0] - before


def _commit(env: Env) -> Action:
    return Action(kind="commit", params={
        "message": "Rework the app", "author_name": "Ada Author", "author_email": "ada@example.com",
        "author_date": "2026-01-02T03:04:05+01:00",
        "changes": [
            {"op": "write", "path": "src/app.py", "content": env.blobs.put(b"print('v2')\n"),
             "executable": False},
            {"op": "write", "path": "docs/new/guide.md", "content": env.blobs.put(b"# Guide\n"),
             "executable": False},
            {"op": "delete", "path": "run.sh"},
        ]})


def test_a_prediction_starts_one_git_child_and_writes_no_object(git_env: Env) -> None:
    action = _commit(git_env)
    objects = git(git_env.path, "count-objects", "-v")

    assert _children(lambda: git_env.adapter.predict_post_state(action, blobs=git_env.blobs)) == 1
    assert git(git_env.path, "count-objects", "-v") == objects, "only the status check ran"


def test_a_write_starts_only_the_journalled_git_children(git_env: Env) -> None:
    git_env.execute(git_env.write("notes.txt", b"first\n"), "key-0")  # the key index is built once
    action = _commit(git_env)

    # status (the drift check), update-ref (the commit point), read-tree (the checkout),
    # log (the new commit's receipt): the blobs, trees and commit object cost no child.
    assert _children(lambda: git_env.execute(action, "key-1")) == 4, "a write after the first"
    assert git(git_env.path, "show", "--stat", "--format=%s", "HEAD").startswith("Rework the app")
    assert git(git_env.path, "status", "--porcelain") == ""
