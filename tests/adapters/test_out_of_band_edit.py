"""Someone edits the environment behind the run's back. The version does not move (only the
adapter moves it) but the fingerprint does, so a resume that bound only the version would miss
it (DESIGN.md section 7: "binding only the environment version, not instance and fingerprint";
section 5: same version with different content fails closed)."""

from __future__ import annotations

import os

from tests.adapters.support import Env, git


def test_binding_only_the_environment_version_misses_an_out_of_band_edit(env: Env) -> None:
    before = env.adapter.observe()

    (env.path / "src" / "app.py").write_text("print('tampered')\n")

    after = env.adapter.observe()
    assert after.version == before.version
    assert after.instance_id == before.instance_id
    assert after.state_fingerprint != before.state_fingerprint


def test_two_different_edits_give_two_different_fingerprints(env: Env) -> None:
    (env.path / "src" / "app.py").write_text("print('one')\n")
    one = env.adapter.observe()
    (env.path / "src" / "app.py").write_text("print('two')\n")
    two = env.adapter.observe()

    assert one.version == two.version
    assert one.state_fingerprint != two.state_fingerprint


def test_new_files_deletions_and_mode_changes_are_drift(env: Env) -> None:
    seen = {env.adapter.observe().state_fingerprint}

    (env.path / "untracked.txt").write_text("new\n")
    seen.add(env.adapter.observe().state_fingerprint)
    os.chmod(env.path / "src" / "app.py", 0o755)
    seen.add(env.adapter.observe().state_fingerprint)
    (env.path / "README.md").unlink()
    seen.add(env.adapter.observe().state_fingerprint)

    assert len(seen) == 4


def test_undoing_the_edit_restores_the_fingerprint(env: Env) -> None:
    before = env.adapter.observe()
    original = (env.path / "src" / "app.py").read_bytes()
    (env.path / "src" / "app.py").write_text("print('tampered')\n")
    assert env.adapter.observe().state_fingerprint != before.state_fingerprint

    (env.path / "src" / "app.py").write_bytes(original)

    assert env.adapter.observe().state_fingerprint == before.state_fingerprint


def test_a_staged_edit_and_an_out_of_band_commit_are_drift_in_git(git_env: Env) -> None:
    before = git_env.adapter.observe()
    (git_env.path / "src" / "app.py").write_text("print('staged')\n")
    git(git_env.path, "add", "src/app.py")

    staged = git_env.adapter.observe()
    assert staged.version == before.version
    assert staged.state_fingerprint != before.state_fingerprint
    assert b"src/app.py" in staged.attachments["status.txt"]

    git(git_env.path, "commit", "-q", "-m", "An edit nobody asked Ratchet for")
    committed = git_env.adapter.observe()
    assert committed.version != before.version
    assert git_env.adapter.receipts() == []


def test_the_workspace_journal_dir_is_not_content(workspace_env: Env) -> None:
    before = workspace_env.adapter.observe()

    (workspace_env.path / ".ratchet" / "scratch-note").write_text("adapter-owned\n")

    assert workspace_env.adapter.observe().state_fingerprint == before.state_fingerprint
