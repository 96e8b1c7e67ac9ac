"""Story: the receipts ledger holds what grows with a run, and a broken ledger freezes the run.

DESIGN.md section 3.1: executed writes, consumed nonces and quarantined keys are ledger entries
written in the transaction of the checkpoint that records them; the checkpoint signs the
ledger's ``(length, head)``. A dropped, reordered, edited or truncated row is found on restore
(by a fresh process, or by the full verification ``checkpoint verify`` runs) and fails closed
with ``LedgerChainError`` and a review case, the run frozen in ``needs_review``.
"""

from __future__ import annotations

import pytest

import runtime.checkpoints.ledger
from runtime.checkpoints.protocol import checkpoint_commit, checkpoint_restore, checkpoint_verify
from runtime.core.ledger import LedgerKind, state_ledger
from runtime.errors import LedgerChainError
from runtime.models import LedgerEntry, ReviewCase, Run
from tests.core import builders as b
from tests.factories import scenario_fingerprint

pytestmark = pytest.mark.django_db(transaction=True)


def _run_with_entries(start_run, count: int = 4) -> str:
    state, first = start_run()
    ledger = state_ledger(state)
    for i in range(count - 1):
        ledger.record_executed(b.executed_for(f"ik-{i}", cursor=i))
    ledger.consume_nonce("nonce-1")
    checkpoint_commit(lease=first.lease, state=state, expected_generation=1)
    return state.identity.run_id


def _fresh_process_restore(run_id: str):
    runtime.checkpoints.ledger._VERIFIED.clear()  # what a new process knows: nothing verified yet
    return checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint())


def _assert_frozen(run_id: str, caught: pytest.ExceptionInfo) -> None:
    assert caught.value.context["run_id"] == run_id
    run = Run.objects.get(run_id=run_id)
    assert (run.phase, run.stop_reason) == ("needs_review", "ledger_corrupt")
    case = ReviewCase.objects.get(run_id=run_id, reason="ledger_corrupt")
    assert case.status == "open" and "ledger" in case.detail


def test_it_writes_ledger_entries_with_the_checkpoint_and_looks_them_up(start_run):
    run_id = _run_with_entries(start_run)
    rows = list(LedgerEntry.objects.filter(run_id=run_id).order_by("seq"))
    assert [(r.seq, r.kind) for r in rows] == [(1, "executed_write"), (2, "executed_write"),
                                               (3, "executed_write"), (4, "consumed_nonce")]
    restored = _fresh_process_restore(run_id)
    assert (restored.state.ledger.length, restored.state.ledger.head) == (4, rows[-1].entry_hash)
    ledger = state_ledger(restored.state)
    assert ledger.executed("ik-1").receipt.idempotency_key == "ik-1"
    assert ledger.executed("ik-9") is None
    assert ledger.nonce_consumed("nonce-1") and not ledger.key_quarantined("ik-1")
    assert [w.idempotency_key for w in ledger.executed_writes()] == ["ik-0", "ik-1", "ik-2"]


def test_it_verifies_incrementally_what_this_process_already_verified(start_run, monkeypatch):
    run_id = _run_with_entries(start_run)
    checked: list[int] = []
    original = runtime.checkpoints.ledger.ledger_chain_check
    monkeypatch.setattr(runtime.checkpoints.ledger, "ledger_chain_check",
                        lambda **kw: (checked.append(len(list(kw["rows"]))), original(**kw)))
    _fresh_process_restore(run_id)
    checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint())
    checkpoint_verify(run_id=run_id)
    assert checked == [4, 0, 4]  # fresh: all; same process: none new; verify: all again


def _edit_body(run_id: str) -> None:
    LedgerEntry.objects.filter(run_id=run_id, seq=2).update(body='{"forged":true}')


def _truncate(run_id: str) -> None:
    LedgerEntry.objects.filter(run_id=run_id, seq=4).delete()


def _swap_rows(run_id: str) -> None:
    LedgerEntry.objects.filter(run_id=run_id, seq=2).update(seq=-2)
    LedgerEntry.objects.filter(run_id=run_id, seq=3).update(seq=2)
    LedgerEntry.objects.filter(run_id=run_id, seq=-2).update(seq=3)


def _drop_row(run_id: str) -> None:
    LedgerEntry.objects.filter(run_id=run_id, seq=2).delete()


def _edit_key(run_id: str) -> None:
    LedgerEntry.objects.filter(run_id=run_id, seq=1).update(key="ik-other")


def _full_verification_after_an_incremental_restore(run_id: str, tamper) -> None:
    checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint())  # now trusted here
    tamper(run_id)
    checkpoint_verify(run_id=run_id)


def _fresh_process_restore_after(run_id: str, tamper) -> None:
    tamper(run_id)
    _fresh_process_restore(run_id)


@pytest.mark.parametrize(("tamper", "found", "find"), [
    pytest.param(_edit_body, "entry 2 was altered", _fresh_process_restore_after, id="edited"),
    pytest.param(_truncate, "truncated", _fresh_process_restore_after, id="truncated"),
    pytest.param(_swap_rows, "entry 2 does not link", _fresh_process_restore_after, id="reordered"),
    pytest.param(_drop_row, "entry 2 is missing", _fresh_process_restore_after, id="missing"),
    pytest.param(_edit_key, "entry 1 was altered", _full_verification_after_an_incremental_restore,
                 id="full-verification-finds-what-an-incremental-restore-trusts"),
])
def test_a_tampered_ledger_fails_closed_with_a_review_case(start_run, tamper, found, find):
    run_id = _run_with_entries(start_run)
    with pytest.raises(LedgerChainError, match=found) as caught:
        find(run_id, tamper)
    _assert_frozen(run_id, caught)


def test_it_refuses_a_key_executed_twice_across_commits(start_run):
    run_id = _run_with_entries(start_run)
    restored = _fresh_process_restore(run_id)
    with pytest.raises(Exception, match="already executed"):
        state_ledger(restored.state).record_executed(b.executed_for("ik-0"))
    assert LedgerEntry.objects.filter(run_id=run_id, kind=LedgerKind.EXECUTED_WRITE.value).count() == 3
