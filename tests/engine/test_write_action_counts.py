"""Story: a write action costs four durable transactions: two on the main database and two on
the mark's (DESIGN.md section 4.3).

A write is an intent checkpoint (before the side effect) and a receipt checkpoint (after it),
each one transaction on the main database (the commit point) and the high-water mark's
compare-and-set in its own database (section 4.2). The lease renewal, the receipt-cache row, the
ledger entry and the trace events ride in those commits. Counted over a scripted workspace run's
steps, not timed, with one commit per write turned off: this is the price of a write whose
proposal must wait (an approval, a gateway call), which keeps its two checkpoints (DESIGN.md
section 4.13). The folded write of a planner that proposes at once is counted in
``test_one_commit_per_write.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import override_settings

from runtime.engine import run_advance, run_start
from tests.helpers.db_counts import DbCounts, db_counting

pytestmark = pytest.mark.django_db(transaction=True)

MAX_MAIN_TRANSACTIONS_PER_WRITE = 2
MAX_DURABLE_TRANSACTIONS_PER_WRITE = 4
MAX_STATEMENTS_PER_WRITE = 40


def _per_step(run_id: str, steps: int) -> list[DbCounts]:
    marks: list[tuple[int, int, int]] = []
    with db_counting() as counts:
        run_advance(run_id=run_id, max_steps=steps, on_step=lambda _report: marks.append(
            (counts.transactions, counts.statements, counts.mark_transactions)))
    per_step, last = [], (0, 0, 0)
    for transactions, statements, mark in marks:
        per_step.append(DbCounts(statements=statements - last[1], transactions=transactions - last[0],
                                 mark_transactions=mark - last[2]))
        last = (transactions, statements, mark)
    return per_step


@override_settings(RATCHET_FOLD_INTENTS=False)
def test_a_write_action_takes_two_main_transactions_and_two_of_the_mark(workspace_task: Path):
    run_id = run_start(spec_path=workspace_task)
    steps = _per_step(run_id, 6)  # propose + execute, three writes

    writes = [(steps[i], steps[i + 1]) for i in range(0, len(steps) - 1, 2)]
    assert len(writes) == 3
    for intent, receipt in writes[1:]:  # the first step of a session also opens it
        assert intent.transactions + receipt.transactions <= MAX_MAIN_TRANSACTIONS_PER_WRITE, (intent, receipt)
        assert intent.durable + receipt.durable <= MAX_DURABLE_TRANSACTIONS_PER_WRITE, (intent, receipt)
        assert intent.statements + receipt.statements <= MAX_STATEMENTS_PER_WRITE, (intent, receipt)
