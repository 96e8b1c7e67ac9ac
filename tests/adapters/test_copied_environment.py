"""An operator restores a copy of the environment. The copy has the same content -- the same
fingerprint -- but it is another instance, so a run bound to the original must notice
(DESIGN.md section 5: same content on another instance fails closed)."""

from __future__ import annotations

import shutil
from pathlib import Path

from runtime.adapters.git import GitAdapter
from runtime.adapters.workspace import WorkspaceAdapter
from tests.adapters.support import Env, git


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
