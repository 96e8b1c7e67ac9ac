"""Story: a repository Ratchet wrote to before the receipt joined the source's trailer block
keeps working. Its receipts were always a paragraph of their own after ``\\n\\n`` -- also after
a message that ended in its own ``Signed-off-by`` block or in a newline -- and the one trailer
reader finds them, by key and in the list, from a fresh adapter as from the one that wrote the
next commit (DESIGN.md section 5.16)."""

from __future__ import annotations

from runtime.adapters.git.receipts import original_message
from tests.adapters.support import Env, commit_action, git

INTENT = "sha256:" + "ab" * 32
OLD_FORM = [
    (b"Fix it\n\nSigned-off-by: Ada <ada@example.com>\n", "old-1"),
    (b"ratchet: write notes.txt", "old-2"),
    (b"Plain\n", "old-3"),
]


def _old_form_commit(env: Env, message: bytes, key: str, token: int) -> str:
    """A commit exactly as the earlier adapter wrote it: message, ``\\n\\n``, its trailer block."""
    block = (f"Idempotency-Key: {key}\nIntent-Digest: {INTENT}\nFencing-Token: {token}\n"
             f"Committed-At: 1700000000\n").encode()
    git(env.path, "commit", "-q", "--allow-empty", "--cleanup=verbatim", "-F", "-",
        input=message + b"\n\n" + block)
    return git(env.path, "rev-parse", "HEAD").strip()


def test_receipts_written_in_the_old_form_are_found(git_env: Env) -> None:
    made = {key: _old_form_commit(git_env, message, key, n + 1)
            for n, (message, key) in enumerate(OLD_FORM)}

    fresh = git_env.reopen()

    for message, key in OLD_FORM:
        receipt = fresh.lookup_receipt(key)
        assert receipt is not None and receipt.receipt_id == made[key]
        assert (receipt.intent_digest, receipt.fencing_token) == (INTENT, OLD_FORM.index((message, key)) + 1)
        raw = git(git_env.path, "cat-file", "commit", made[key]).split("\n\n", 1)[1].encode()
        # The old separator was always "\n\n": a message ending in a newline reads back with one
        # more; the commit bytes themselves are untouched.
        assert original_message(raw) in (message, message + b"\n")
    assert [r.idempotency_key for r in fresh.receipts()] == [key for _, key in OLD_FORM]

    receipt = git_env.execute(commit_action(git_env), "new-1", token=5)

    assert [r.idempotency_key for r in git_env.adapter.receipts()] == ["old-1", "old-2", "old-3",
                                                                       "new-1"]
    assert git_env.adapter.lookup_receipt("old-1").receipt_id == made["old-1"]
    assert receipt.fencing_token == 5
