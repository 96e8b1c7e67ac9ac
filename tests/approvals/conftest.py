"""Stories about approvals: a scripted workspace run whose second write is high risk."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.adapters.factory import open_adapter
from runtime.decisions.approvals import approvals_waiting
from runtime.engine import run_advance, run_start
from tests.factories import write_scripted_task

STEPS = [
    {"target": "notes.txt", "content": "low-risk note\n"},
    {"target": "limits.toml", "content": "max_orders = 3\n", "risk": "high"},
]


@dataclass
class ApprovalStory:
    run_id: str
    workspace: Path

    def adapter(self):
        return open_adapter("workspace", self.workspace)

    def waiting(self):
        [item] = approvals_waiting(run_ids=[self.run_id])
        return item

    def effects_for(self, key: str) -> int:
        return sum(1 for r in self.adapter().receipts() if r.idempotency_key == key)


@pytest.fixture
def story(tmp_path: Path, ratchet_keys) -> ApprovalStory:
    """A run frozen in awaiting_approval before its high-risk write."""
    spec = write_scripted_task(tmp_path, steps=STEPS, approval_risks=("high",))
    run_id = run_start(spec_path=spec, worker="worker-a")
    report = run_advance(run_id=run_id, worker="worker-a")
    assert report.phase == "awaiting_approval"
    return ApprovalStory(run_id=run_id, workspace=tmp_path / "ws")
