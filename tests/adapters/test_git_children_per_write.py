"""Story: the git adapter writes objects in-process and starts git children only for what the
operation journal guards (DESIGN.md section 5.5): counted, not timed."""

from __future__ import annotations

from runtime.adapters.git.process import PROCESSES_STARTED
from tests.adapters.support import Env, commit_action, git


def _children(call) -> int:  # type: ignore[no-untyped-def]
    before = PROCESSES_STARTED[0]
    call()
    return PROCESSES_STARTED[0] - before


def test_a_prediction_on_a_clean_tree_starts_no_git_child_and_writes_no_object(git_env: Env
                                                                             ) -> None:
    action = commit_action(git_env)
    objects = git(git_env.path, "count-objects", "-v")

    # The status check is answered in-process: libgit2 sees nothing uncommitted.
    assert _children(lambda: git_env.adapter.predict_post_state(action, blobs=git_env.blobs)) == 0
    assert git(git_env.path, "count-objects", "-v") == objects


def test_a_write_starts_only_the_journalled_git_children(git_env: Env) -> None:
    git_env.execute(git_env.write("notes.txt", b"first\n"), "key-0")  # the key index is built once
    action = commit_action(git_env)

    # update-ref (the commit point) and read-tree (the checkout): the drift check on a clean
    # tree, the blobs, trees and commit object and the receipt read back cost no child.
    assert _children(lambda: git_env.execute(action, "key-1")) == 2, "a write after the first"
    assert git(git_env.path, "show", "--stat", "--format=%s", "HEAD").startswith("Rework the app")
    assert git(git_env.path, "status", "--porcelain") == ""
