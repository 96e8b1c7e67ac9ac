"""Story: a checkpoint advance is two durable transactions on the main database, and the mark's
compare-and-set one more in its own database, the commit point (DESIGN.md sections 4.2, 4.3).

The first main transaction writes the checkpoint row and its ledger entries under the fenced run
row; the second moves the fence (the trace head in its own UPDATE), commits the mark in its own
database while the run row stays locked, and writes the trace events. Counted on the main
database, not timed: the counts do not depend on load.
"""

from __future__ import annotations

import pytest

from runtime.checkpoints import checkpoint_commit
from runtime.core.ledger import state_ledger
from tests.core import builders as b
from tests.helpers.db_counts import db_counting
from tests.runtime.conftest import advance

pytestmark = pytest.mark.django_db(transaction=True)

MAIN_TRANSACTIONS_PER_ADVANCE = 2
MAX_STATEMENTS_PER_ADVANCE = 8
"""On the main database: the fenced row lock, ledger INSERT, checkpoint INSERT; the fence UPDATE
(+ trace head), trace INSERT; and SQLite's two BEGIN IMMEDIATE. The mark's UPDATE runs on its
own database's connection."""


def test_it_commits_a_checkpoint_advance_in_two_main_transactions(start_run):
    state, first = start_run()
    second = checkpoint_commit(lease=first.lease, state=advance(state), expected_generation=1,
                               events=[("step", {"n": 1})])
    nxt = advance(advance(state))
    state_ledger(nxt).record_executed(b.executed_for("ik-count"))

    with db_counting() as counts:
        checkpoint_commit(lease=second.lease, state=nxt, expected_generation=2,
                          events=[("write.executed", {"idempotency_key": "ik-count"}), ("x", {})])

    assert counts.transactions == MAIN_TRANSACTIONS_PER_ADVANCE, counts.sql
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

    assert (counts.transactions, counts.statements <= MAX_STATEMENTS_PER_ADVANCE) == (
        MAIN_TRANSACTIONS_PER_ADVANCE, True)
