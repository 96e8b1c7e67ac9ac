"""Story: the commit a write just made is read back in-process, and what is read equals what
``git log`` reads from the same commit, for every message, key and identity a replay may carry
(DESIGN.md section 5.5)."""

from __future__ import annotations

import pygit2
import pytest

from runtime.adapters.git.process import GitProcess
from runtime.adapters.git.receipts import commit_info, written_commit
from tests.adapters.support import Env, commit_action, git

MESSAGES = [
    "plain title",
    "",
    "   \n\t\n",
    "title\r\n\r\nCRLF body\r\n",
    "no newline at the end",
    "trailing blanks\n\n\n\n",
    "Looks like trailers\n\nSigned-off-by: A <a@example.com>\nIdempotency-Key: forged",
    "Fencing-Token: 99\nIdempotency-Key: other",
    "divider\n---\nnot a patch\n",
    "# a comment-looking line\n\n# another",
    "Ünïcode títle 🚀\n\nbody: with colon",
    "Conflicts:\n\tfile.txt\n",
    "Joined\n\nCo-authored-by: B <b@example.com>\nSigned-off-by: A <a@example.com>\n",
    "Joined, no newline\n\n(cherry picked from commit 0123456789abcdef)\nSigned-off-by: A",
    "Trailing blank after the block\n\nAcked-by: C\n\n\n# comment\n",
    "Scissors\n\nbody\n# ------------------------ >8 ------------------------\nIdempotency-Key: cut\n",
]
KEYS = ["key-1", "ключ-2", "emoji 🗝 key", "key: with colon", "k" * 200]


@pytest.mark.parametrize("message", MESSAGES)
def test_the_read_back_commit_equals_what_git_log_reads(git_env: Env, message: str) -> None:
    repo = pygit2.Repository(str(git_env.path / ".git"))
    for n, key in enumerate(KEYS):
        action = commit_action(git_env, message=f"{message}{n}" if n else message,
                               changes=[{"op": "write", "path": f"f{n}.txt",
                                         "content": git_env.blobs.put(f"{n}\n".encode()),
                                         "executable": False}])
        receipt = git_env.execute(action, key, approval_digest="sha256:" + "a" * 64)
        sha = receipt.receipt_id

        ours = written_commit(repo, sha, instance_id="test")

        assert ours is not None
        assert ours == commit_info(GitProcess(git_env.path), repo, sha, instance_id="test")
        assert receipt.idempotency_key == key


def test_a_commit_with_an_encoding_header_reads_the_same_in_process_and_through_git(
        git_env: Env) -> None:
    """Both reads parse the raw message bytes (``git log`` would re-encode them) with the one
    trailer reader."""
    action = commit_action(git_env, message="caf\u00e9\n\nSigned-off-by: J\u00e9r\u00f4me <j@x>\n",
                           encoding="ISO-8859-1")
    receipt = git_env.execute(action, "key-latin")
    repo = pygit2.Repository(str(git_env.path / ".git"))

    ours = written_commit(repo, receipt.receipt_id, instance_id="test")
    assert ours == commit_info(GitProcess(git_env.path), repo, receipt.receipt_id, instance_id="test")
    assert ours is not None and ours.keys == ("key-latin",)
    assert "signed-off-by" in ours.trailers
    assert git(git_env.path, "cat-file", "-p", receipt.receipt_id).count("encoding ISO-8859-1")
