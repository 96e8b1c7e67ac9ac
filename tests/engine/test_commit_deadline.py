"""An approved write carries its approval's deadline into the adapter, which refuses to commit
past it and records its commit time on the database clock, so an approval that expires during a slow adapter
call cannot still be written (DESIGN.md sections 4.7 and 5.5)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine

import runtime.engine.execute as execute_module
from runtime.adapters.deadline import adapter_takes_deadline
from runtime.adapters.factory import open_adapter
from runtime.checkpoints.session import RunSession
from runtime.core.checkpoint import StopReason
from runtime.database.clock import db_now
from runtime.decisions.approvals import approval_grant, approval_refresh, approvals_waiting
from runtime.engine import run_advance, run_start
from tests.engine.legacy_plugin import LegacyWorkspace
from tests.engine.support import trace_events
from tests.factories import write_scripted_task
from tests.helpers.procs import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

STEPS = [
    {"target": "notes.txt", "content": "low-risk note\n"},
    {"target": "limits.toml", "content": "max_orders = 3\n", "risk": "high"},
]
SLOW_CALL_TTL = 8
"""Seconds of validity: long enough for the steps before the call on a loaded machine; the slow
call then lasts until the database clock has passed the expiry, whatever that takes."""
LEGACY_ENTRY = 'adapter = "python"\nentry = "tests.engine.legacy_plugin:LegacyWorkspace"'


def _waiting_run(tmp_path: Path, *, adapter: str | None = None) -> tuple[str, Path]:
    spec = write_scripted_task(tmp_path, steps=STEPS, approval_risks=("high",))
    if adapter is not None:
        spec.write_text(spec.read_text().replace('adapter = "workspace"', adapter))
    run_id = run_start(spec_path=spec, worker="worker-a")
    assert run_advance(run_id=run_id, worker="worker-a").phase == "awaiting_approval"
    return run_id, tmp_path / "ws"


def _grant(run_id: str, ttl: float):
    [item] = approvals_waiting(run_ids=[run_id])
    granted = approval_grant(run_id=run_id, approver="olivia",
                             environment_fingerprint=item.environment_fingerprint, ttl_seconds=ttl)
    return item, granted


def _slow_blobs(monkeypatch: pytest.MonkeyPatch, expires_at) -> Callable[[RunSession, str], bytes]:
    """The adapter's blob fetch (before its commit point) lasts until the approval has expired
    by the database clock: a slow call whose length the test controls, not a timed race."""
    fetch = execute_module.session_blob

    def slow(session: RunSession, digest: str) -> bytes:
        wait_for(lambda: db_now() > expires_at, timeout=60, what="the approval to expire during the call")
        return fetch(session, digest)

    monkeypatch.setattr(execute_module, "session_blob", slow)
    return fetch


def test_it_refuses_to_commit_a_write_after_its_approval_deadline(tmp_path, monkeypatch):
    run_id, workspace = _waiting_run(tmp_path)
    item, granted = _grant(run_id, ttl=SLOW_CALL_TTL)
    fetch = _slow_blobs(monkeypatch, granted.expires_at)

    report = run_advance(run_id=run_id, worker="worker-a")

    assert (report.phase, report.stop_reason) == ("awaiting_approval", StopReason.APPROVAL_EXPIRED.value)
    assert not (workspace / "limits.toml").exists()
    adapter = open_adapter("workspace", workspace)
    assert adapter.lookup_receipt(item.idempotency_key) is None
    assert not [p for p in workspace.iterdir() if p.name.startswith(".ratchet-tmp-")]
    [expired] = trace_events(run_id, "approval.expired")
    assert "before the write could commit" in expired["problem"]
    assert expired["late_by_seconds"] >= 0

    # A fresh approval lets the same write run, once.
    monkeypatch.setattr(execute_module, "session_blob", fetch)
    approval_refresh(run_id=run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)
    assert run_advance(run_id=run_id, worker="worker-a").phase == "completed"
    assert [r.idempotency_key for r in adapter.receipts()].count(item.idempotency_key) == 1


def test_it_records_the_commit_time_in_the_receipt(tmp_path):
    run_id, workspace = _waiting_run(tmp_path)
    item, granted = _grant(run_id, ttl=600)
    before = db_now()
    # This worker's clock runs 10 minutes slow; the receipt's commit time is still on the
    # database clock, the one the approval's expiry is judged by.
    with time_machine.travel(db_now() - timedelta(minutes=10), tick=True):
        assert run_advance(run_id=run_id, worker="worker-slow").phase == "completed"
    after = db_now()

    receipt = open_adapter("workspace", workspace).lookup_receipt(item.idempotency_key)
    assert receipt is not None and receipt.committed_at is not None
    assert before <= receipt.committed_at <= after + timedelta(seconds=1)
    assert receipt.committed_at <= granted.expires_at


def test_it_calls_a_plugin_adapter_without_the_deadline_argument_it_does_not_take(tmp_path):
    run_id, workspace = _waiting_run(tmp_path, adapter=LEGACY_ENTRY)
    assert not adapter_takes_deadline(LegacyWorkspace)
    _grant(run_id, ttl=600)

    assert run_advance(run_id=run_id, worker="worker-a").phase == "completed"
    assert (workspace / "limits.toml").read_text() == "max_orders = 3\n"


def test_it_sends_a_plugin_write_that_committed_after_its_approval_expired_to_review(tmp_path, monkeypatch):
    run_id, workspace = _waiting_run(tmp_path, adapter=LEGACY_ENTRY)
    _, granted = _grant(run_id, ttl=SLOW_CALL_TTL)
    _slow_blobs(monkeypatch, granted.expires_at)

    report = run_advance(run_id=run_id, worker="worker-a")

    # The plug-in could not be told the deadline, so it wrote; its receipt's commit time is
    # after the expiry, and the run goes to review as before deadlines existed (section 6.4).
    assert (report.phase, report.stop_reason) == ("needs_review", StopReason.UNTRUSTED_RECEIPT.value)
    assert (workspace / "limits.toml").exists()
