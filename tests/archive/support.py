"""Finished runs to archive, a live run beside them, and what each run holds."""

from __future__ import annotations

from pathlib import Path

from runtime.archive.runs import BULKY_MODELS
from runtime.decisions.approvals import approvals_waiting
from runtime.engine import run_advance, run_start
from runtime.models import Run
from tests.factories import write_scripted_task

LIVE_STEPS = [
    {"target": "notes.txt", "content": "low-risk note\n"},
    {"target": "limits.toml", "content": "max_orders = 3\n", "risk": "high"},
]


def finished_runs(directory: Path, count: int, *, writes: int = 2) -> list[str]:
    """``count`` completed scripted runs, each on its own workspace (its own environment)."""
    ids = []
    for i in range(count):
        steps = [{"target": f"f{j}.txt", "content": f"run {i} write {j}\n"} for j in range(writes)]
        spec = write_scripted_task(directory / f"done-{i}", steps=steps)
        run_id = run_start(spec_path=spec, worker="w-done")
        assert run_advance(run_id=run_id, worker="w-done").phase == "completed"
        ids.append(run_id)
    return ids


def live_run(directory: Path) -> str:
    """A run waiting for approval before its high-risk write (live: it must never be archived)."""
    spec = write_scripted_task(directory / "live", steps=LIVE_STEPS, approval_risks=("high",))
    run_id = run_start(spec_path=spec, worker="w-live")
    assert run_advance(run_id=run_id, worker="w-live").phase == "awaiting_approval"
    return run_id


def waiting_item(run_id: str):
    [item] = approvals_waiting(run_ids=[run_id])
    return item


def held_rows(run_id: str) -> dict[str, int]:
    """Rows of each bulky model ``run_id`` holds."""
    return {model.__name__: model.objects.filter(run_id=run_id).count() for model in BULKY_MODELS}


def state_of(run_id: str) -> str:
    """``"archived"`` (record set, no bulky rows), ``"intact"`` (no record, rows present) or
    ``"HALF"`` (anything else)."""
    run = Run.objects.get(run_id=run_id)
    rows = held_rows(run_id)
    if run.archived_at is not None and run.archive_digest and not any(rows.values()):
        return "archived"
    if run.archived_at is None and not run.archive_digest and rows["Checkpoint"] and rows["TraceEvent"]:
        return "intact"
    return "HALF"
