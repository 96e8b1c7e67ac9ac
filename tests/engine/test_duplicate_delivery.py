"""Story: the same request is delivered twice; the environment sees one effect (DESIGN.md section 5.6).

A worker checkpoints the intent of a write and stops (phase pending). The same write -- same
idempotency key, same intent -- then reaches the adapter a second time, the way a retried RPC
or a duplicated queue message would. When the run resumes, the engine queries the adapter by
key first, finds the original receipt and reconciles it: no second commit, no new effect.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.core.ledger import state_ledger
from runtime.engine import run_advance, run_start
from runtime.evidence.attachments import attachment_get
from runtime.models import Run
from tests.engine.support import (
    SOURCE_COMMITS,
    key_effects,
    restore,
    run_adapter,
    run_target,
    trace_events,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _deliver_pending_again(run_id: str):
    pending = restore(run_id).state.pending
    adapter = run_adapter(run_id)
    token = Run.objects.get(run_id=run_id).lease_version
    first = adapter.execute(pending.action, idempotency_key=pending.idempotency_key,
                            intent_digest=pending.intent_digest, fencing_token=token,
                            blobs=lambda d: attachment_get(digest=d))
    again = adapter.execute(pending.action, idempotency_key=pending.idempotency_key,
                            intent_digest=pending.intent_digest, fencing_token=token,
                            blobs=lambda d: attachment_get(digest=d))
    return pending, first, again


def test_it_returns_the_original_receipt_for_the_same_key_and_intent(replay_task: Path) -> None:
    run_id = run_start(spec_path=replay_task)
    assert run_advance(run_id=run_id, max_steps=1).phase == "pending"

    pending, first, again = _deliver_pending_again(run_id)

    assert again == first
    assert key_effects(run_target(run_id)) == {pending.idempotency_key: 1}


def test_it_reconciles_a_duplicate_delivery_without_a_second_effect(replay_task: Path) -> None:
    run_id = run_start(spec_path=replay_task)
    run_advance(run_id=run_id, max_steps=1)
    pending, first, _ = _deliver_pending_again(run_id)

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("completed", "verified")
    effects = key_effects(run_target(run_id))
    assert len(effects) == SOURCE_COMMITS and set(effects.values()) == {1}
    reconciled = trace_events(run_id, "write.reconciled")
    assert [e["idempotency_key"] for e in reconciled] == [pending.idempotency_key]
    assert reconciled[0]["receipt_id"] == first.receipt_id
    assert reconciled[0]["receipt_fingerprint"] == first.fingerprint()
    executed = [e["idempotency_key"] for e in trace_events(run_id, "write.executed")]
    assert pending.idempotency_key not in executed and len(executed) == SOURCE_COMMITS - 1
    state = restore(run_id).state
    assert [w.reconciled for w in state_ledger(state).executed_writes()] == [True] + [False] * (SOURCE_COMMITS - 1)
    assert trace_events(run_id, "audit.effects")[-1]["duplicates"] == 0
