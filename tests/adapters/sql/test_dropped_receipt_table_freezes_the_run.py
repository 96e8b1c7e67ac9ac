"""Story: an operator drops the SQL adapter's receipt table in the middle of a run.

The run has recorded its first order. Whatever comes next -- proposing the second order, or
executing a write that was already pending -- must not read the missing table as "no receipt,
execute again": the adapter raises a typed error, and the run freezes in ``needs_review`` with a
review case that keeps the reason, while the target holds exactly the rows it held before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from runtime.models import ReviewCase, Run
from tests.adapters.sql.support import Target, write_orders_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("pending", [False, True], ids=["before-the-next-proposal", "with-a-write-pending"])
def test_it_freezes_the_run_for_review_when_the_receipt_table_is_dropped(tmp_path: Path, target: Target,
                                                                         pending: bool) -> None:
    run_id = run_start(spec_path=write_orders_task(tmp_path / "task", target, ["o-1", "o-2"]))
    run_advance(run_id=run_id, max_steps=3 if pending else 2)  # o-1 proposed and recorded (and o-2 proposed)
    assert target.rows_for_key("o-1") == 1

    target.sql("DROP TABLE ratchet_sql_receipts")
    report = run_advance(run_id=run_id)

    assert report.phase == "needs_review"
    assert Run.objects.get(run_id=run_id).stop_reason == "adapter_refused"
    case = ReviewCase.objects.get(run_id=run_id)
    assert "SqlReceiptStoreMissingError" in case.detail
    assert target.rows_for_key("o-2") == 0
    assert target.rows_for_key("o-1") == 1
