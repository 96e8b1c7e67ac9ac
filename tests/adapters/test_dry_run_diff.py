"""A reviewer approving a risky write sees exactly what it would change: a unified diff computed
without touching the environment (DESIGN.md section 6, approval screens)."""

from __future__ import annotations

from runtime.core.checkpoint import Action
from tests.adapters.support import Env


def test_it_shows_a_changed_line(env: Env) -> None:
    diff = env.adapter.dry_run_diff(env.write("src/app.py", b"print('v2')\n"), blobs=env.blobs)

    assert "--- a/src/app.py" in diff
    assert "+++ b/src/app.py" in diff
    assert "-print('hello')" in diff
    assert "+print('v2')" in diff
    assert (env.path / "src" / "app.py").read_text() == "print('hello')\n"


def test_it_shows_a_new_file_and_a_deletion(env: Env) -> None:
    created = env.adapter.dry_run_diff(env.write("docs/new.md", b"hello\n", executable=True),
                                       blobs=env.blobs)
    deleted = env.adapter.dry_run_diff(env.delete("README.md"), blobs=env.blobs)

    assert "new file mode 100755" in created
    assert "+hello" in created
    assert "deleted file mode 100644" in deleted
    assert "-# demo" in deleted
    assert not (env.path / "docs").exists()
    assert (env.path / "README.md").exists()


def test_it_does_not_print_binary_content(env: Env) -> None:
    diff = env.adapter.dry_run_diff(env.write("logo.bin", b"\x89PNG\x00\x01\x02"), blobs=env.blobs)

    assert "Binary files" in diff
    assert "PNG" not in diff


def test_git_shows_every_change_of_a_commit_action(git_env: Env) -> None:
    action = Action(kind="commit", params={
        "message": "Two changes", "author_name": "Ada Author", "author_email": "ada@example.com",
        "author_date": "2026-01-02T03:04:05+00:00",
        "changes": [
            {"op": "write", "path": "a.txt", "content": git_env.blobs.put(b"a\n"),
             "executable": False},
            {"op": "delete", "path": "run.sh"},
        ]})

    diff = git_env.adapter.dry_run_diff(action, blobs=git_env.blobs)

    assert "diff --git a/a.txt b/a.txt" in diff
    assert "diff --git a/run.sh b/run.sh" in diff
