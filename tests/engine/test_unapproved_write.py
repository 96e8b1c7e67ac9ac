"""Story: a write that needs a human approval causes zero side effects without one (DESIGN.md sections 6.2 and 8).

The policy lists ``high`` in ``approval_risks``. The run proposes the high-risk write, records
its intent and a dry-run diff for the approver, and stops in ``awaiting_approval``. Nothing
reaches the environment: no receipt in the adapter's own store, no file, no commit -- however
often a worker resumes the run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from runtime.evidence.attachments import attachment_get
from tests.engine.support import (
    keyed_commits,
    restore,
    run_adapter,
    run_target,
    trace_events,
    workspace_files,
    workspace_journal,
    write_replay_task,
    write_scripted_task,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_makes_no_workspace_write_without_an_approval(tmp_path: Path) -> None:
    task = write_scripted_task(tmp_path, [
        {"target": "config/limits.toml", "content": "max_orders = 3\n", "risk": "high"},
        {"target": "README.md", "content": "after the approval\n"},
    ], approval_risks=("high",))
    run_id = run_start(spec_path=task)

    first = run_advance(run_id=run_id)
    again = run_advance(run_id=run_id)

    assert (first.phase, first.stop_reason) == ("awaiting_approval", "approval_required")
    assert (again.phase, again.steps) == ("awaiting_approval", 0)
    workspace = run_target(run_id)
    assert run_adapter(run_id).receipts() == []
    assert workspace_journal(workspace) == []
    assert workspace_files(workspace) == {}
    pending = restore(run_id).state.pending
    assert pending.requires_approval and pending.approval is None
    (proposed,) = trace_events(run_id, "intent.proposed")
    assert proposed["idempotency_key"] == pending.idempotency_key
    assert b"+max_orders = 3" in attachment_get(digest=proposed["dry_run_diff"])


def test_it_makes_no_commit_without_an_approval(tmp_path: Path, source: Path) -> None:
    task = write_replay_task(tmp_path, source, risk="high", approval_risks=("high",))
    run_id = run_start(spec_path=task)
    target = run_target(run_id)
    head = run_adapter(run_id).observe()

    report = run_advance(run_id=run_id)

    assert report.phase == "awaiting_approval"
    assert keyed_commits(target) == []
    now = run_adapter(run_id).observe()
    assert (now.version, now.state_fingerprint) == (head.version, head.state_fingerprint)
