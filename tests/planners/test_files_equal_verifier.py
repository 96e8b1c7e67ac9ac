"""Story: the shipped scripted demo, applied step by step, satisfies its files-equal verifier.

The verifier names each wrong path: missing, different, present when it should be absent, or a
symlink that points outside the target.
"""

from __future__ import annotations

import os
from pathlib import Path

from runtime.core.checkpoint import Action
from runtime.planners.base import Done
from runtime.planners.factory import build_planner
from runtime.taskspec import TaskSpec, load_task_spec
from runtime.verifiers.builtin import verify
from tests.planners.gitrepo import SHIPPED, BlobStore, observation


def _apply(target: Path, action: Action, blobs: BlobStore) -> None:
    path = target / action.target
    if action.kind == "delete_file":
        path.unlink()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blobs.blobs[action.params["content"]])


def _run_demo(tmp_path: Path) -> tuple[TaskSpec, Path]:
    spec = load_task_spec(SHIPPED / "scripted_demo.toml")
    target = tmp_path / "workspace"
    target.mkdir()
    planner = build_planner(spec)
    state = planner.init_state()
    blobs = BlobStore()
    cursor = 0
    while not isinstance(
        proposal := planner.propose(cursor=cursor, planner_state=state,
                                    observation=observation(), put_blob=blobs.put),
        Done,
    ):
        _apply(target, proposal, blobs)
        cursor += 1
    assert cursor == 4
    return spec, target


def test_it_passes_the_shipped_demo_applied_in_full(tmp_path: Path) -> None:
    spec, target = _run_demo(tmp_path)

    outcome = verify(spec, observation("w4"), target)

    assert outcome.passed, outcome.detail
    assert "w4" in outcome.detail


def test_it_names_every_wrong_file(tmp_path: Path) -> None:
    spec, target = _run_demo(tmp_path)
    (target / "README.md").unlink()
    (target / "config/limits.toml").write_text("max_orders = 1000\n")
    (target / "scratch").mkdir(exist_ok=True)
    (target / "scratch/notes.txt").write_text("came back\n")

    outcome = verify(spec, observation(), target)

    assert not outcome.passed
    assert "README.md (missing)" in outcome.detail
    assert "config/limits.toml (content differs)" in outcome.detail
    assert "scratch/notes.txt (should not exist)" in outcome.detail


def test_it_does_not_follow_a_symlink_out_of_the_target(tmp_path: Path) -> None:
    spec, target = _run_demo(tmp_path)
    outside = tmp_path / "outside.md"
    outside.write_bytes((target / "README.md").read_bytes())
    (target / "README.md").unlink()
    os.symlink(outside, target / "README.md")

    outcome = verify(spec, observation(), target)

    assert not outcome.passed and "points outside the target" in outcome.detail


def test_the_always_verifier_passes(tmp_path: Path) -> None:
    data = load_task_spec(SHIPPED / "scripted_demo.toml").model_dump(mode="json")
    data["verifier"] = {"kind": "always"}

    outcome = verify(TaskSpec.from_json(data), observation(), tmp_path)

    assert outcome.passed
