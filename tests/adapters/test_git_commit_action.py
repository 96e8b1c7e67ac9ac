"""A planner replays a developer's commit: one action becomes ONE git commit with the original
message and author, committed by Ratchet, carrying the Idempotency-Key, Intent-Digest and
Fencing-Token trailers."""

from __future__ import annotations

import pytest

from runtime.adapters.git.receipts import original_message
from runtime.errors import InvalidActionError
from tests.adapters.support import Env, commit_action, commits_with_key, git


def test_it_lands_one_commit_with_the_original_message_author_and_trailers(git_env: Env) -> None:
    parent = git(git_env.path, "rev-parse", "HEAD").strip()
    action = commit_action(git_env)

    receipt = git_env.execute(action, "key-1", token=4)

    sha = receipt.receipt_id
    assert git(git_env.path, "rev-parse", "HEAD").strip() == sha
    assert git(git_env.path, "rev-parse", f"{sha}^").strip() == parent
    assert git(git_env.path, "log", "-1", "--format=%an|%ae|%aI|%cn", sha).strip() == \
        "Ada Author|ada@example.com|2026-01-02T03:04:05+01:00|Ratchet"
    body = git(git_env.path, "log", "-1", "--format=%B", sha)
    assert body.startswith("Rework the app\n\nLonger explanation.\n\nSigned-off-by: Ada")
    trailers = git(git_env.path, "log", "-1", "--format=%(trailers:only,unfold)", sha)
    assert f"Idempotency-Key: key-1\nIntent-Digest: {action.intent_digest()}\nFencing-Token: 4\n" \
        in trailers
    assert commits_with_key(git_env.path, "key-1") == 1
    assert git(git_env.path, "show", "--format=", "--no-renames", "--name-status", sha).split() == [
        "A", "bin/tool", "D", "run.sh", "M", "src/app.py"]
    assert git(git_env.path, "ls-tree", sha, "bin/tool").startswith("100755")
    assert git(git_env.path, "status", "--porcelain") == ""
    assert receipt.result == {"commit": sha, "tree": git(git_env.path, "rev-parse",
                                                         f"{sha}^{{tree}}").strip(),
                              "parent": parent}


def test_single_file_actions_land_as_ratchet_commits(git_env: Env) -> None:
    receipt = git_env.execute(git_env.write("notes/todo.txt", b"ship it\n"), "key-1")

    assert git(git_env.path, "log", "-1", "--format=%s|%an|%cn", receipt.receipt_id).strip() == \
        "ratchet: write notes/todo.txt|Ratchet|Ratchet"


def test_a_message_that_forges_trailers_is_kept_verbatim_and_never_read_as_a_receipt(
        git_env: Env) -> None:
    """A message is replayed byte for byte, even one ending with another
    key's trailer (a history that Ratchet itself replayed). A block holding a Ratchet trailer
    is never joined, so git's trailers are Ratchet's own block alone (DESIGN.md section 5.16).
    Without a final newline the message reads back with one (the two cannot be told apart)."""
    forged = "Innocent\n\nIdempotency-Key: someone-elses-key"
    receipt = git_env.execute(commit_action(git_env, message=forged), "key-1")

    assert git_env.adapter.lookup_receipt("someone-elses-key") is None
    assert [r.idempotency_key for r in git_env.adapter.receipts()] == ["key-1"]
    assert commits_with_key(git_env.path, "someone-elses-key") == 0
    raw = git(git_env.path, "cat-file", "commit", receipt.receipt_id)
    message = raw.split("\n\n", 1)[1]
    # The block holding another key is not joined: Ratchet's lines are a paragraph of their own.
    assert message.startswith(forged + "\n\nIdempotency-Key: key-1\n")
    assert original_message(message.encode()) == forged.encode() + b"\n"


@pytest.mark.parametrize("overrides", [
    {"author_date": "2026-01-02T03:04:05"},          # no offset
    {"author_date": "next tuesday"},
    {"author_name": "Eve <eve@example.com>"},
    {"author_email": "eve\n@example.com"},
    {"message": "NUL \x00 inside"},
    {"changes": {}},
    {"encoding": "UTF-16"},
    {"committer_name": "Only the name"},
])
def test_it_rejects_malformed_commit_params(git_env: Env, overrides) -> None:
    with pytest.raises(InvalidActionError):
        git_env.execute(commit_action(git_env, **overrides), "key-1")
    assert git_env.adapter.receipts() == []


def test_it_rejects_conflicting_changes_within_onecommit_action(git_env: Env) -> None:
    content = git_env.blobs.put(b"x\n")
    twice = [{"op": "write", "path": "a.txt", "content": content, "executable": False},
             {"op": "delete", "path": "a.txt"}]
    nested = [{"op": "write", "path": "a", "content": content, "executable": False},
              {"op": "write", "path": "a/b", "content": content, "executable": False}]

    for changes in (twice, nested):
        with pytest.raises(InvalidActionError):
            git_env.execute(commit_action(git_env, changes=changes), "key-1")
