"""A worker is SIGKILLed in the middle of a write (DESIGN.md section 8: kill the process before
and after every persistence step). A real child process arms one of the adapter's named crash
points and kills itself there; the parent then checks that what ``lookup_receipt`` says and what
``observe()`` shows agree, and that finishing the run yields exactly one effect.

* killed before the commit point (git ref update / workspace rename): no receipt, the environment
  is exactly the pre-state, and executing again with the same key writes once;
* killed after it: the receipt IS found (git: the commit carries the trailers; workspace: the
  prepared journal record is rolled forward) and the environment is exactly the predicted
  post-state at the receipt's version.
"""

from __future__ import annotations

import signal

import pytest

from runtime.core.crashpoints import CRASH_POINTS
from tests.adapters.support import Env, effects_for_key, git, journal_records, run_child

BEFORE_COMMIT_POINT = {
    "workspace": ["workspace.before_write", "workspace.after_prepare", "workspace.before_rename"],
    "git": ["git.before_write", "git.after_objects", "git.before_ref_update"],
}
AFTER_COMMIT_POINT = {
    "workspace": ["workspace.after_rename", "workspace.after_write"],
    "git": ["git.after_ref_update", "git.after_write"],
}
CASES = [(kind, point, False) for kind, points in BEFORE_COMMIT_POINT.items() for point in points]
CASES += [(kind, point, True) for kind, points in AFTER_COMMIT_POINT.items() for point in points]


def test_every_adapter_crash_point_is_registered_and_covered() -> None:
    from runtime.adapters.git import adapter as git_module
    from runtime.adapters.workspace import adapter as workspace_module

    declared = {value for module in (git_module, workspace_module)
                for name, value in vars(module).items() if name.startswith("CP_")}
    assert declared <= set(CRASH_POINTS)
    assert declared == {point for _, point, _ in CASES}


@pytest.mark.parametrize(("kind", "point", "landed"), CASES)
@pytest.mark.parametrize("op", ["write", "delete"])
def test_lookup_receipt_and_observe_agree_after_a_sigkill(
        request: pytest.FixtureRequest, kind: str, point: str, landed: bool, op: str) -> None:
    env: Env = request.getfixturevalue(f"{kind}_env")
    if op == "write":
        action = env.write("src/app.py", b"print('v2')\n")
    else:
        action = env.delete("src/app.py")
    pre = env.adapter.observe()
    predicted = env.adapter.predict_post_state(action, blobs=env.blobs)

    child = run_child(env, action, "key-1", crash_at=point)

    assert child.returncode == -signal.SIGKILL, child.stderr
    adapter = env.reopen()  # a recovering worker: a new process's view, nothing cached
    receipt = adapter.lookup_receipt("key-1")
    observed = adapter.observe()
    if landed:
        assert receipt is not None
        assert receipt.intent_digest == action.intent_digest()
        assert observed.version == receipt.environment_version_after
        assert observed.state_fingerprint == predicted
    else:
        assert receipt is None
        assert observed.version == pre.version
        assert observed.state_fingerprint == pre.state_fingerprint

    # The recovering worker finishes the step with the same key: one effect, whatever happened.
    final = env.execute(action, "key-1", adapter=adapter)
    if landed:
        assert final == receipt
    assert effects_for_key(env, "key-1") == 1
    after = adapter.observe()
    assert after.state_fingerprint == predicted
    assert after.version == final.environment_version_after


def test_git_working_tree_is_finished_by_the_next_call(git_env: Env) -> None:
    """Killed right after the ref moved: the next observe() completes the checkout, leaving a
    clean working tree rather than a reversed staged diff."""
    action = git_env.write("src/app.py", b"print('v2')\n")

    child = run_child(git_env, action, "key-1", crash_at="git.after_ref_update")
    assert child.returncode == -signal.SIGKILL
    assert (git_env.path / ".git" / "ratchet-sync.json").exists()

    git_env.reopen().observe()

    assert git(git_env.path, "status", "--porcelain") == ""
    assert (git_env.path / "src" / "app.py").read_bytes() == b"print('v2')\n"
    assert not (git_env.path / ".git" / "ratchet-sync.json").exists()


def test_workspace_rolls_a_renamed_write_forward_and_marks_it_recovered(workspace_env: Env
                                                                        ) -> None:
    action = workspace_env.write("notes/todo.txt", b"ship it\n")

    child = run_child(workspace_env, action, "key-1", crash_at="workspace.after_rename")
    assert child.returncode == -signal.SIGKILL

    receipt = workspace_env.reopen().lookup_receipt("key-1")

    assert receipt is not None
    assert receipt.result["recovered"] is True
    assert [r["type"] for r in journal_records(workspace_env.path)] == ["prepared", "committed"]


def test_workspace_rolls_an_unrenamed_write_back_and_removes_its_temp_file(workspace_env: Env
                                                                           ) -> None:
    action = workspace_env.write("notes/todo.txt", b"ship it\n")

    child = run_child(workspace_env, action, "key-1", crash_at="workspace.before_rename")
    assert child.returncode == -signal.SIGKILL
    assert [p.name for p in (workspace_env.path / "notes").iterdir()][0].startswith(".ratchet-tmp-")

    assert workspace_env.reopen().lookup_receipt("key-1") is None

    assert list((workspace_env.path / "notes").iterdir()) == []
    assert [r["type"] for r in journal_records(workspace_env.path)] == ["prepared", "aborted"]
