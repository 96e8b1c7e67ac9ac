"""Story: a key look-up costs the same at the 1,000th write as at the first (a replay of a long
history must not slow down as it goes; DESIGN.md section 5.5).

The git adapter's key index is derived from commit trailers only. With HEAD unchanged a look-up
starts no git child; after commits made outside the adapter it reads only those; after history
is rewritten it rebuilds, so a key on a commit that is no longer reachable is gone and a key on
a new foreign commit is found -- the trailers always win (DESIGN.md section 5.5).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from runtime.adapters.git import process as git_process
from runtime.errors import DuplicateReceiptError
from tests.adapters.support import Env, git


@contextmanager
def _git_children() -> Iterator[Counter[str]]:
    """Count the adapter's git children by subcommand while the block runs."""
    seen: Counter[str] = Counter()
    original = git_process.GitProcess.run

    def counted(self: git_process.GitProcess, args, **kwargs):  # type: ignore[no-untyped-def]
        seen[args[0]] += 1
        return original(self, args, **kwargs)

    git_process.GitProcess.run = counted  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        git_process.GitProcess.run = original  # type: ignore[method-assign]


def _foreign_commit(env: Env, name: str, message: str) -> None:
    (env.path / name).write_text(f"{name}\n")
    git(env.path, "add", name)
    git(env.path, "commit", "-q", "-m", message)


def test_it_looks_keys_up_without_a_git_child_while_head_stays(git_env: Env) -> None:
    for n in range(5):
        git_env.execute(git_env.write(f"notes/{n}.txt", f"{n}\n".encode()), f"key-{n}")

    with _git_children() as seen:
        found = [git_env.adapter.lookup_receipt(f"key-{n}") for n in range(5)]
        missing = git_env.adapter.lookup_receipt("key-absent")
        receipts = git_env.adapter.receipts()

    assert all(found) and missing is None and len(receipts) == 5
    assert seen["log"] == 0


def test_it_reads_only_new_commits_and_rebuilds_after_a_rewrite(git_env: Env) -> None:
    first = git_env.execute(git_env.write("a.txt", b"a\n"), "key-1")
    git_env.adapter.lookup_receipt("key-1")
    _foreign_commit(git_env, "b.txt", "Copied\n\nIdempotency-Key: key-1\nFencing-Token: 1")

    with _git_children() as seen, pytest.raises(DuplicateReceiptError):
        git_env.adapter.lookup_receipt("key-1")
    assert seen["log"] == 1

    git(git_env.path, "reset", "-q", "--hard", first.receipt_id)
    assert git_env.adapter.lookup_receipt("key-1") == first
    git(git_env.path, "reset", "-q", "--hard", "HEAD~1")
    assert git_env.adapter.lookup_receipt("key-1") is None
    assert git_env.adapter.receipts() == []
