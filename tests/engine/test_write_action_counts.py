"""Story: a write action costs at most four durable transactions on the main database (DESIGN.md
section 4.3).

A write is an intent checkpoint (before the side effect) and a receipt checkpoint (after it),
each two transactions on the main database while the high-water mark, in its own database
(section 4.2), commits between them. The lease renewal, the receipt-cache row, the ledger entry
and the trace events ride in those commits. Counted over a scripted workspace run's steps, not
timed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from tests.helpers.db_counts import DbCounts, db_counting

pytestmark = pytest.mark.django_db(transaction=True)

MAX_TRANSACTIONS_PER_WRITE = 4
MAX_STATEMENTS_PER_WRITE = 40


def _per_step(run_id: str, steps: int) -> list[DbCounts]:
    marks: list[tuple[int, int]] = []
    with db_counting() as counts:
        run_advance(run_id=run_id, max_steps=steps,
                    on_step=lambda _report: marks.append((counts.transactions, counts.statements)))
    per_step, last = [], (0, 0)
    for transactions, statements in marks:
        per_step.append(DbCounts(statements=statements - last[1], transactions=transactions - last[0]))
        last = (transactions, statements)
    return per_step


def test_a_write_action_takes_at_most_four_durable_main_transactions(workspace_task: Path):
    run_id = run_start(spec_path=workspace_task)
    steps = _per_step(run_id, 6)  # propose + execute, three writes

    writes = [(steps[i], steps[i + 1]) for i in range(0, len(steps) - 1, 2)]
    assert len(writes) == 3
    for intent, receipt in writes[1:]:  # the first step of a session also opens it
        assert intent.transactions + receipt.transactions <= MAX_TRANSACTIONS_PER_WRITE, (intent, receipt)
        assert intent.statements + receipt.statements <= MAX_STATEMENTS_PER_WRITE, (intent, receipt)
