"""Story: the environment changed behind the run's back; resume fails closed (DESIGN.md section 5.4).

On resume the environment must be the same instance, in the checkpointed state or the one state
the single pending write produces. Each drift below is made for real, out of band, between two
workers, and each must freeze the run in needs_review (``environment_drift``) with no further
write:

* same version, different content (a workspace file edited by hand: the journal version does
  not move, only the fingerprint does);
* same content, another instance (the workspace's instance id replaced, or the directory swapped
  for a copy with a new identity);
* two commits made outside the run (git), or the pending write's own commit plus one more.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.test import override_settings

from runtime.engine import run_advance, run_start
from runtime.models import Run
from tests.engine.support import (
    execute_outside,
    journal_effects,
    keyed_commits,
    outside_commit,
    restore,
    run_adapter,
    run_target,
    trace_events,
    trace_types,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _assert_frozen_without_writes(run_id: str, report, effects_before, effects) -> None:
    assert (report.phase, report.stop_reason) == ("needs_review", "environment_drift")
    assert effects() == effects_before
    generation = Run.objects.get(run_id=run_id).generation
    again = run_advance(run_id=run_id)
    assert (again.phase, again.steps) == ("needs_review", 0)
    assert Run.objects.get(run_id=run_id).generation == generation
    assert effects() == effects_before
    assert trace_events(run_id, "review.opened")[-1]["reason"] == "environment_drift"


def _placed(run_id: str, stop_after: int) -> None:
    """Advance ``stop_after`` steps: 1 leaves the first write pending, 2 leaves it recorded with
    nothing pending -- the settled state a receipt commits alone when the next proposal is not
    folded into it (DESIGN.md section 4.13), which is turned off here to reach it mid-run."""
    with override_settings(RATCHET_FOLD_INTENTS=False):
        assert run_advance(run_id=run_id, max_steps=stop_after).phase == (
            "pending" if stop_after == 1 else "running")


@pytest.mark.parametrize("stop_after", [1, 2], ids=["pending", "running"])
def test_it_binds_the_fingerprint_not_only_the_version(workspace_task: Path,
                                                        stop_after: int) -> None:
    run_id = run_start(spec_path=workspace_task)
    _placed(run_id, stop_after)
    workspace = run_target(run_id)
    version = run_adapter(run_id).observe().version
    before = journal_effects(workspace)
    (workspace / "README.md").write_text("edited by hand\n")
    assert run_adapter(run_id).observe().version == version  # same version, other content

    report = run_advance(run_id=run_id)

    _assert_frozen_without_writes(run_id, report, before, lambda: journal_effects(workspace))


def test_it_binds_the_instance_not_only_version_and_content(workspace_task: Path) -> None:
    run_id = run_start(spec_path=workspace_task)
    run_advance(run_id=run_id, max_steps=2)
    workspace = run_target(run_id)
    seen = run_adapter(run_id).observe()
    before = journal_effects(workspace)
    (workspace / ".ratchet" / "instance-id").write_text("another-instance-0001\n")
    now = run_adapter(run_id).observe()
    assert (now.version, now.state_fingerprint) == (seen.version, seen.state_fingerprint)
    assert now.instance_id != seen.instance_id

    report = run_advance(run_id=run_id)

    _assert_frozen_without_writes(run_id, report, before, lambda: journal_effects(workspace))
    assert trace_events(run_id, "review.opened")[-1]["observed"]["instance_id"] == now.instance_id


def test_it_refuses_a_copy_of_the_environment_swapped_in_place(workspace_task: Path) -> None:
    run_id = run_start(spec_path=workspace_task)
    run_advance(run_id=run_id, max_steps=1)  # pending: the intent is bound to this instance
    workspace = run_target(run_id)
    original = workspace.with_name("original")
    workspace.rename(original)
    shutil.copytree(original, workspace)
    (workspace / ".ratchet" / "instance-id").unlink()  # a copy gets its own identity
    before = journal_effects(workspace)

    report = run_advance(run_id=run_id)

    _assert_frozen_without_writes(run_id, report, before, lambda: journal_effects(workspace))
    assert journal_effects(original) == before  # the original was not written to either


@pytest.mark.parametrize("stop_after", [1, 2], ids=["pending", "running"])
def test_it_refuses_two_commits_made_outside_the_run(replay_task: Path, stop_after: int) -> None:
    run_id = run_start(spec_path=replay_task)
    _placed(run_id, stop_after)
    target = run_target(run_id)
    before = keyed_commits(target)
    for n in (1, 2):
        (target / f"outside-{n}.txt").write_text(f"{n}\n")
        outside_commit(target, f"outside commit {n}")

    report = run_advance(run_id=run_id)

    _assert_frozen_without_writes(run_id, report, before, lambda: keyed_commits(target))


@pytest.mark.parametrize("drift", ["file", "commit"])
def test_it_does_not_replay_a_pending_command_after_resume_without_checking_file_and_commit(
    replay_task: Path, drift: str
) -> None:
    run_id = run_start(spec_path=replay_task)
    assert run_advance(run_id=run_id, max_steps=1).phase == "pending"
    pending = restore(run_id).state.pending
    target = run_target(run_id)
    (target / "README.md").write_text("changed under the pending command\n")
    if drift == "commit":  # the base commit moved by one
        outside_commit(target, "moved the base", all_tracked=True)

    report = run_advance(run_id=run_id)

    _assert_frozen_without_writes(run_id, report, [], lambda: keyed_commits(target))
    assert run_adapter(run_id).lookup_receipt(pending.idempotency_key) is None
    assert "write.executed" not in trace_types(run_id)
    assert restore(run_id).state.pending == pending


def test_it_refuses_the_pending_write_plus_one_more_commit(replay_task: Path) -> None:
    run_id = run_start(spec_path=replay_task)
    run_advance(run_id=run_id, max_steps=1)
    target = run_target(run_id)
    receipt = execute_outside(run_id)
    (target / "outside.txt").write_text("one more\n")
    outside_commit(target, "one more commit on top")
    before = keyed_commits(target)

    report = run_advance(run_id=run_id)

    _assert_frozen_without_writes(run_id, report, before, lambda: keyed_commits(target))
    assert "write.reconciled" not in trace_types(run_id)
    assert restore(run_id).state.review_cases[-1].receipt == receipt
