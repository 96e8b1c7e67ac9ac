"""Story: the target already holds a receipt for the pending write's key, for another intent.

Something else wrote under the run's derived idempotency key (a copied task, a hand-run script)
between the intent checkpoint and the execution. The SQL adapter hands back the stored receipt
unchanged and writes nothing; the engine sees the intent digests differ and freezes the run as a
``receipt_conflict`` with the receipt kept in the review case (DESIGN.md section 6).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.core.idempotency import derive_key
from runtime.engine import run_advance, run_start
from runtime.models import ReviewCase, Run
from tests.adapters.sql.support import Target, order, write_orders_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_freezes_the_run_when_the_key_holds_another_intent(tmp_path: Path, target: Target) -> None:
    run_id = run_start(spec_path=write_orders_task(tmp_path / "task", target, ["o-1"]))
    run_advance(run_id=run_id, max_steps=1)  # the intent for o-1 is committed, nothing executed
    key = derive_key(run_id=run_id, cursor=0, replan_epoch=0)
    other = order("o-other", "someone-else")
    stored = target.adapter().execute(other, idempotency_key=key, intent_digest=other.intent_digest(),
                                      fencing_token=0, blobs=lambda digest: b"")

    report = run_advance(run_id=run_id)

    assert report.phase == "needs_review"
    assert Run.objects.get(run_id=run_id).stop_reason == "receipt_conflict"
    case = ReviewCase.objects.get(run_id=run_id)
    assert case.receipt["intent_digest"] == stored.intent_digest
    assert target.sql("SELECT order_id FROM orders") == [("o-other",)]  # o-1 was never written
