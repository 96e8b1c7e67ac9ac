"""Stories about review cases: a run frozen on a receipt conflict (same key, different intent)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.adapters.factory import open_adapter
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.checkpoint import Action
from runtime.decisions.reviews import decision_prepare, decision_sign_for
from runtime.engine import run_advance, run_start
from runtime.evidence.attachments import attachment_get, attachment_put
from runtime.models import ReviewCase, Run
from tests.factories import write_scripted_task

STEPS = [
    {"target": "a.txt", "content": "A\n"},
    {"target": "b.txt", "content": "B\n"},
]


@dataclass
class ConflictStory:
    run_id: str
    workspace: Path
    key: str
    case_id: str

    def adapter(self):
        return open_adapter("workspace", self.workspace)

    def sign(self, decision: str = "replan", reviewer: str = "rita", **binding_changes):
        binding = decision_prepare(case_id=self.case_id)
        binding.update(binding_changes)
        return decision_sign_for(case_id=self.case_id, reviewer=reviewer, decision=decision, binding=binding)

    def phase(self) -> str:
        return Run.objects.get(run_id=self.run_id).phase

    def effects_for(self, key: str) -> int:
        return sum(1 for r in self.adapter().receipts() if r.idempotency_key == key)

    def tamper_receipt_result(self) -> None:
        """Rewrite the adapter's own record of the conflicting receipt (drift the reviewer never saw)."""
        journal = self.workspace / ".ratchet" / "journal.jsonl"
        lines = []
        for line in journal.read_text().splitlines():
            record = json.loads(line)
            receipt = record.get("receipt")
            if isinstance(receipt, dict) and receipt.get("idempotency_key") == self.key:
                receipt["result"] = {**receipt.get("result", {}), "tampered": True}
            lines.append(json.dumps(record, sort_keys=True, separators=(",", ":")))
        journal.write_text("\n".join(lines) + "\n")


def freeze_on_conflict(run_id: str, workspace: Path) -> str:
    """Stop the run at its pending write, let another caller reuse the key, freeze; return the key."""
    report = run_advance(run_id=run_id, worker="worker-a", max_steps=1)
    assert report.phase == "pending"
    state = checkpoint_verify(run_id=run_id).state
    key = state.pending.idempotency_key
    rogue = Action(kind="write_file", target=state.pending.action.target,
                   params={"content": attachment_put(data=b"rogue write\n"), "executable": False})
    token = Run.objects.get(run_id=run_id).lease_version
    open_adapter("workspace", workspace).execute(
        rogue, idempotency_key=key, intent_digest=rogue.intent_digest(), fencing_token=token,
        blobs=lambda d: attachment_get(digest=d))
    report = run_advance(run_id=run_id, worker="worker-a")
    assert report.phase == "needs_review"
    assert report.stop_reason == "receipt_conflict"
    return key


@pytest.fixture
def conflict(tmp_path: Path, ratchet_keys) -> ConflictStory:
    spec = write_scripted_task(tmp_path, steps=STEPS)
    run_id = run_start(spec_path=spec, worker="worker-a")
    key = freeze_on_conflict(run_id, tmp_path / "ws")
    case = ReviewCase.objects.get(run_id=run_id, status="open")
    return ConflictStory(run_id=run_id, workspace=tmp_path / "ws", key=key, case_id=case.case_id)
