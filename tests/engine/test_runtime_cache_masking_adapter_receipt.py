"""Story: the runtime cache never masks a deleted or drifted adapter receipt (DESIGN.md sections 5.2 and 7).

The idempotency cache is a rebuildable copy; the adapter's receipt is the evidence. Two ways the
copy can lie, both reproduced for real:

* the receipt is gone from the adapter: a worker is SIGKILLed right after caching the receipt
  (``engine.after_receipt_cache``), then the repository is reset to the pre-write commit, so
  the commit carrying the key is no longer in history. The cache still holds a receipt.
* the cached copy drifted from the adapter's in namespace, adapter version, receipt id, intent
  digest, result or post-write version (the stored JSON is edited).

Either way resuming must freeze the run (``receipt_missing`` / ``receipt_drift``) and never
trace ``write.reconciled`` -- no replay is claimed from the cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.checkpoints.receipts import receipt_cache_put
from runtime.core.ledger import state_ledger
from runtime.engine import run_advance, run_start
from runtime.models import IdempotencyRecord
from tests.engine.support import execute_outside, keyed_commits, restore, run_adapter, run_target, trace_types
from tests.helpers.procs import KILLED, child_env, run_manage
from tests.planners.gitrepo import git

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_does_not_let_the_runtime_cache_mask_a_deleted_adapter_receipt(
    replay_task: Path,
) -> None:
    killed = run_manage("run", str(replay_task), "--no-progress",
                        env=child_env(RATCHET_CRASH_AT="engine.after_receipt_cache",
                                      RATCHET_LEASE_SECONDS="1"))
    assert killed.returncode == KILLED, killed.stderr
    run_id = killed.stdout.splitlines()[0].removeprefix("run ")
    pending = restore(run_id).state.pending
    # The cache row is written by the receipt commit itself (DESIGN.md section 4.3), so the kill
    # left none; put the adapter's receipt there, as a runtime that cached it first would have.
    assert not IdempotencyRecord.objects.filter(idempotency_key=pending.idempotency_key).exists()
    receipt_cache_put(run_id=run_id, receipt=run_adapter(run_id).lookup_receipt(pending.idempotency_key))
    target = run_target(run_id)
    assert keyed_commits(target) == [pending.idempotency_key]
    # Someone rewinds the repository: the commit (the adapter's receipt) is gone from history.
    git(target, "reset", "-q", "--hard", pending.pre_state.version)
    assert keyed_commits(target) == []

    report = run_advance(run_id=run_id, wait_seconds=10)

    assert (report.phase, report.stop_reason) == ("needs_review", "receipt_missing")
    assert "write.reconciled" not in trace_types(run_id)
    assert keyed_commits(target) == []
    state = restore(run_id).state
    assert state.pending == pending and state_ledger(state).executed_writes() == []
    assert state.review_cases[-1].reason == "receipt_missing"


DRIFTS = {
    "namespace": "git:00000000-0000-0000-0000-000000000000",
    "adapter_version": "ratchet-git/0",
    "receipt_id": "0" * 40,
    "intent_digest": "sha256:" + "0" * 64,
    "result": {"commit": "0" * 40, "tree": "0" * 40, "parent": ""},
    "environment_version_after": "f" * 40,
}


@pytest.mark.parametrize("field", sorted(DRIFTS))
def test_it_does_not_let_the_runtime_cache_mask_a_drifted_adapter_receipt(
    replay_task: Path, field: str
) -> None:
    run_id = run_start(spec_path=replay_task)
    assert run_advance(run_id=run_id, max_steps=1).phase == "pending"
    pending = restore(run_id).state.pending
    receipt = execute_outside(run_id)
    receipt_cache_put(run_id=run_id, receipt=receipt)
    row = IdempotencyRecord.objects.get(idempotency_key=pending.idempotency_key)
    row.receipt = {**row.receipt, field: DRIFTS[field]}
    row.save(update_fields=["receipt"])

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("needs_review", "receipt_drift")
    assert "write.reconciled" not in trace_types(run_id)
    state = restore(run_id).state
    assert state.pending == pending and state_ledger(state).executed_writes() == []
    assert state.review_cases[-1].receipt == receipt  # the authoritative one is kept
    assert keyed_commits(run_target(run_id)) == [pending.idempotency_key]
