"""Story: a checkpoint advance is one durable transaction on the main database, the commit point,
and the mark's compare-and-set one more in its own database (DESIGN.md sections 4.2, 4.3).

The main transaction moves the fence (and the trace head) in one UPDATE, drops ledger rows no
committed checkpoint covers, and inserts the ledger entries, the checkpoint row and the trace
events. Counted on both databases, not timed: the counts do not depend on load.
"""

from __future__ import annotations

import pytest

from runtime.checkpoints.protocol import checkpoint_commit
from runtime.core.ledger import state_ledger
from tests.core import builders as b
from tests.helpers.db_counts import db_counting
from tests.runtime.conftest import advance

pytestmark = pytest.mark.django_db(transaction=True)

MAIN_TRANSACTIONS_PER_ADVANCE = 1
MARK_TRANSACTIONS_PER_ADVANCE = 1
MAX_STATEMENTS_PER_ADVANCE = 7
"""On the main database: the fence UPDATE (+ trace head), the orphan DELETE, ledger INSERT,
checkpoint INSERT, trace INSERT, and SQLite's BEGIN IMMEDIATE; on PostgreSQL the same five sent
as one batch between a ``BEGIN`` and a ``COMMIT`` said in SQL (DESIGN.md section 4.13: two round
trips). The mark's UPDATE runs on its own database's connection."""


def test_it_commits_a_checkpoint_advance_in_one_main_transaction_and_the_marks(start_run):
    state, first = start_run()
    second = checkpoint_commit(lease=first.lease, state=advance(state), expected_generation=1,
                               events=[("step", {"n": 1})])
    nxt = advance(advance(state))
    state_ledger(nxt).record_executed(b.executed_for("ik-count"))

    with db_counting() as counts:
        checkpoint_commit(lease=second.lease, state=nxt, expected_generation=2,
                          events=[("write.executed", {"idempotency_key": "ik-count"}), ("x", {})])

    assert (counts.transactions, counts.mark_transactions) == (
        MAIN_TRANSACTIONS_PER_ADVANCE, MARK_TRANSACTIONS_PER_ADVANCE), counts.sql
    assert counts.statements <= MAX_STATEMENTS_PER_ADVANCE, counts.sql


def test_it_does_not_grow_the_advance_with_the_ledger(start_run):
    state, first = start_run()
    ledger = state_ledger(state)
    lease, generation = first.lease, first.generation
    for i in range(40):
        ledger.record_executed(b.executed_for(f"ik-{i}", cursor=i))
    result = checkpoint_commit(lease=lease, state=state, expected_generation=generation)
    assert state.ledger.length == 40

    with db_counting() as counts:
        checkpoint_commit(lease=result.lease, state=state, expected_generation=result.generation)

    assert (counts.transactions, counts.mark_transactions,
            counts.statements <= MAX_STATEMENTS_PER_ADVANCE) == (
        MAIN_TRANSACTIONS_PER_ADVANCE, MARK_TRANSACTIONS_PER_ADVANCE, True)
