"""Story: a checkpoint advance is one durable transaction (DESIGN.md section 4.3).

The lease fence, the high-water-mark compare-and-set, the checkpoint row, its ledger entries and
the trace events of one commit are written by one transaction; the trace head moves in the
fence's own UPDATE. Counted, not timed: the counts do not depend on load.
"""

from __future__ import annotations

import pytest

from runtime.checkpoints import checkpoint_commit
from runtime.core.ledger import state_ledger
from tests.core import builders as b
from tests.helpers.db_counts import db_counting
from tests.runtime.conftest import advance

pytestmark = pytest.mark.django_db(transaction=True)

MAX_STATEMENTS_PER_ADVANCE = 6
"""Fence UPDATE (+ trace head), ledger INSERT, checkpoint INSERT, HWM UPDATE, trace INSERT, and
SQLite's BEGIN IMMEDIATE."""


def test_it_commits_a_checkpoint_advance_in_one_transaction(start_run):
    state, first = start_run()
    second = checkpoint_commit(lease=first.lease, state=advance(state), expected_generation=1,
                               events=[("step", {"n": 1})])
    nxt = advance(advance(state))
    state_ledger(nxt).record_executed(b.executed_for("ik-count"))

    with db_counting() as counts:
        checkpoint_commit(lease=second.lease, state=nxt, expected_generation=2,
                          events=[("write.executed", {"idempotency_key": "ik-count"}), ("x", {})])

    assert counts.transactions == 1, counts.sql
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

    assert (counts.transactions, counts.statements <= MAX_STATEMENTS_PER_ADVANCE) == (1, True)
