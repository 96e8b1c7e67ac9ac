"""An operator restores a copy of the environment. The copy has the same content -- the same
fingerprint -- but it is another instance, so a run bound to the original must notice
(DESIGN.md section 5: same content on another instance fails closed). A byte copy that keeps the
instance id file is caught by the location and identity the control plane registered for the
instance (DESIGN.md section 5.4)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from runtime.adapters.git.adapter import GitAdapter
from runtime.adapters.workspace.adapter import WorkspaceAdapter
from runtime.engine import run_advance, run_start
from runtime.models import ReviewCase
from tests.adapters.support import Env, git
from tests.engine.support import restore, run_target, workspace_journal, write_scripted_task


def test_a_cloned_repository_has_the_same_fingerprint_but_another_instance(git_env: Env,
                                                                            tmp_path: Path) -> None:
    git_env.execute(git_env.write("notes/todo.txt", b"ship it\n"), "key-1")
    original = git_env.adapter.observe()
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(git_env.path), str(clone))

    copy = GitAdapter(clone).observe()

    assert copy.state_fingerprint == original.state_fingerprint
    assert copy.version == original.version
    assert copy.instance_id != original.instance_id


def test_a_copied_repository_with_a_new_identity_is_another_instance(git_env: Env,
                                                                     tmp_path: Path) -> None:
    original = git_env.adapter.observe()
    copy_path = tmp_path / "copy"
    shutil.copytree(git_env.path, copy_path, symlinks=True)
    git(copy_path, "config", "--local", "--unset", "ratchet.instance-id")

    copy = GitAdapter(copy_path).observe()

    assert copy.state_fingerprint == original.state_fingerprint
    assert copy.instance_id != original.instance_id
    assert GitAdapter(copy_path).instance_id() == copy.instance_id  # created once, then stable


def test_a_copied_workspace_with_a_new_identity_is_another_instance(workspace_env: Env,
                                                                    tmp_path: Path) -> None:
    workspace_env.execute(workspace_env.write("notes/todo.txt", b"ship it\n"), "key-1")
    original = workspace_env.adapter.observe()
    copy_path = tmp_path / "copy"
    shutil.copytree(workspace_env.path, copy_path, symlinks=True)
    (copy_path / ".ratchet" / "instance-id").unlink()

    copy = WorkspaceAdapter(copy_path).observe()

    assert copy.state_fingerprint == original.state_fingerprint
    assert copy.version == original.version
    assert copy.instance_id != original.instance_id
    assert WorkspaceAdapter(copy_path).instance_id() == copy.instance_id


def test_the_instance_id_is_stable_for_one_environment(env: Env) -> None:
    first = env.adapter.instance_id()

    assert env.reopen().instance_id() == first
    assert env.adapter.namespace == f"{env.kind}:{first}"


# --- a byte copy a run is pointed at (DESIGN.md section 5.4) -----------------------------------

TWO_WRITES = [{"target": "notes/first.txt", "content": "one\n"}, {"target": "notes/second.txt", "content": "two\n"}]


@pytest.mark.django_db(transaction=True)
def test_it_fails_closed_on_a_byte_copy_of_the_workspace(tmp_path: Path, ratchet_keys: object) -> None:
    run_id = run_start(spec_path=write_scripted_task(tmp_path / "task", TWO_WRITES))
    # first written, second proposed in the same commit (one commit per write, DESIGN.md section 4.13)
    assert run_advance(run_id=run_id, max_steps=2).phase == "pending"
    workspace = run_target(run_id)
    original = workspace.with_name("workspace.orig")
    # The original is moved aside, half-written, and a byte copy (instance id file included)
    # takes its place: same path, same content, same instance id.
    workspace.rename(original)
    subprocess.run(["cp", "-a", str(original), str(workspace)], check=True)
    assert WorkspaceAdapter(workspace).observe() == WorkspaceAdapter(original).observe()

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("needs_review", "environment_drift")
    assert "EnvironmentIdentityError" in restore(run_id).state.stop_detail
    for directory in (workspace, original):
        assert not (directory / "notes" / "second.txt").exists()
        assert len([r for r in workspace_journal(directory) if r["type"] == "committed"]) == 1
    case = ReviewCase.objects.get(run_id=run_id)
    assert case.reason == "environment_drift" and case.status == "open"


@pytest.mark.django_db(transaction=True)
def test_a_copy_elsewhere_claiming_the_registered_instance_fails_closed(tmp_path: Path,
                                                                       ratchet_keys: object) -> None:
    first = run_start(spec_path=write_scripted_task(tmp_path / "task", TWO_WRITES[:1]))
    assert run_advance(run_id=first).phase == "completed"
    copy_task = write_scripted_task(tmp_path / "copy", TWO_WRITES[1:])
    (tmp_path / "copy" / "workspace").rmdir()
    subprocess.run(["cp", "-a", str(run_target(first)), str(tmp_path / "copy" / "workspace")], check=True)

    second = run_start(spec_path=copy_task)
    report = run_advance(run_id=second)

    assert (report.phase, report.stop_reason) == ("needs_review", "environment_drift")
    assert "registered at another location" in restore(second).state.stop_detail
    assert not (tmp_path / "copy" / "workspace" / "notes" / "second.txt").exists()
