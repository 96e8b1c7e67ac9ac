"""A commit that deletes a file and writes a directory of the same name replays as one commit."""

import subprocess

from runtime.adapters.git.adapter import GitAdapter
from runtime.core.canonical import digest_bytes
from runtime.core.checkpoint import Action


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo), "GIT_AUTHOR_NAME": "A",
                               "GIT_AUTHOR_EMAIL": "a@example.org", "GIT_COMMITTER_NAME": "A",
                               "GIT_COMMITTER_EMAIL": "a@example.org", "PATH": "/usr/bin:/bin"}).stdout


def test_it_replays_a_file_turning_into_a_directory(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "notes").write_text("a file for now\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "notes as a file")
    content = b"now a directory\n"
    blobs = {digest_bytes(content): content}
    action = Action(kind="commit", params={
        "message": "notes becomes a directory", "author_name": "A", "author_email": "a@example.org",
        "author_date": "2025-01-01T00:00:00+00:00",
        "changes": [{"op": "delete", "path": "notes"},
                    {"op": "write", "path": "notes/today.md", "content": digest_bytes(content),
                     "executable": False}],
    })
    adapter = GitAdapter(repo)
    predicted = adapter.predict_post_state(action, blobs=blobs.__getitem__)
    receipt = adapter.execute(action, idempotency_key="rk1_file_to_dir", intent_digest=action.intent_digest(),
                              fencing_token=1, blobs=blobs.__getitem__)
    assert adapter.observe().state_fingerprint == predicted
    assert (repo / "notes" / "today.md").read_bytes() == content
    assert _git(repo, "ls-tree", "-r", "--name-only", receipt.receipt_id).split() == ["notes/today.md"]
