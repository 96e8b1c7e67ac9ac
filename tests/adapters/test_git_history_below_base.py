"""Story: receipts are read only from commits this instance could have made.

The adapter records its base -- HEAD when it first opened the repository -- beside its instance
id in ``.git/config``. A repository's own history below that base may hold anything: a forged
``Idempotency-Key`` trailer, a real Ratchet receipt block copied from another repository, a huge
``Fencing-Token``. None of it is this instance's: it must not be listed as a receipt, must not
answer a key look-up, must not raise the fence and must not make the store look corrupt
(DESIGN.md section 5.5). Above the base, the same trailers are read as before.
"""

from __future__ import annotations

from pathlib import Path

from runtime.adapters.git.adapter import GitAdapter
from runtime.adapters.git.state import CONFIG_BASE_COMMIT
from tests.adapters.support import TOKEN, BlobStore, Env, commits_with_key, git

_FORGED = ("Vendored from elsewhere\n\n"
           "Idempotency-Key: someone-elses-key\n"
           "Fencing-Token: 999999\n")
_RECEIPT_LIKE = ("A commit another Ratchet run made\n\n"
                 "Idempotency-Key: key-1\n"
                 "Intent-Digest: sha256:" + "0" * 64 + "\n"
                 "Fencing-Token: 3\n"
                 "Committed-At: 1700000000\n")


def _history_with_foreign_trailers(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# source\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "Root")
    for n, message in enumerate((_FORGED, _RECEIPT_LIKE)):
        (path / f"f{n}.txt").write_text(f"{n}\n")
        git(path, "add", ".")
        git(path, "commit", "-q", "-m", message)
    return path


def test_it_ignores_trailers_below_the_base_it_started_from(tmp_path: Path) -> None:
    repo = _history_with_foreign_trailers(tmp_path / "repo")
    blobs = BlobStore(tmp_path / "blobs")
    env = Env("git", repo, GitAdapter(repo), blobs)
    base = git(repo, "rev-parse", "HEAD").strip()

    assert git(repo, "config", "--local", CONFIG_BASE_COMMIT).strip() == base
    assert env.adapter.receipts() == []
    assert env.adapter.lookup_receipt("someone-elses-key") is None
    assert env.adapter.lookup_receipt("key-1") is None

    # The same key as the copied receipt below the base, with a token far under the forged one.
    receipt = env.execute(env.write("notes.txt", b"ours\n"), "key-1", token=TOKEN)

    assert receipt.receipt_id == git(repo, "rev-parse", "HEAD").strip() != base
    assert [r.idempotency_key for r in env.adapter.receipts()] == ["key-1"]
    assert env.reopen().lookup_receipt("key-1") == receipt
    assert commits_with_key(repo, "key-1") == 2  # one below the base, ours above it


def test_it_reads_the_whole_history_of_an_instance_recorded_before_bases(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "Root")
    blobs = BlobStore(tmp_path / "blobs")
    env = Env("git", repo, GitAdapter(repo), blobs)
    first = env.execute(env.write("b.txt", b"b\n"), "key-1")
    git(repo, "config", "--local", "--unset", CONFIG_BASE_COMMIT)

    reopened = GitAdapter(repo)

    assert reopened.lookup_receipt("key-1") == first
    assert [r.idempotency_key for r in reopened.receipts()] == ["key-1"]
