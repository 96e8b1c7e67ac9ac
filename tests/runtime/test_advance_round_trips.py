"""Story: one checkpoint advance waits on the main database twice and on the mark's once
(DESIGN.md section 4.13).

On PostgreSQL the round trips are counted from libpq's own protocol trace (``PQtrace``), not from
Ratchet's statement wrappers: a wait is a turn from what the client sent to what the server
answered. The main transaction's statements
go out as one pipelined batch (one Sync), then ``COMMIT``; the mark's compare-and-set is one
statement in autocommit mode. SQLite has no network: there the advance keeps its one main and
one mark transaction, statement by statement (``tests/runtime/test_commit_counts.py``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from django.db import DEFAULT_DB_ALIAS, connections

from runtime.checkpoints.protocol import checkpoint_commit
from runtime.core.ledger import state_ledger
from runtime.database.pipeline import pipelined
from runtime.database.routers import hwm_alias
from runtime.models import Checkpoint, TraceEvent
from runtime.models import LedgerEntry as LedgerRow
from tests.core import builders as b
from tests.helpers.db_counts import db_counting
from tests.runtime.conftest import advance

pytestmark = pytest.mark.django_db(transaction=True)

MAIN_ROUND_TRIPS = 2
MARK_ROUND_TRIPS = 1


@contextmanager
def _protocol_traced(alias: str, into: dict[str, str]) -> Iterator[None]:
    """libpq's trace of every message on ``alias``'s connection while the block runs."""
    from psycopg import pq

    connection = connections[alias]
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    handle, name = tempfile.mkstemp(prefix="ratchet-pqtrace-")
    try:
        pgconn.trace(handle)
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield
        finally:
            pgconn.untrace()
        into[alias] = Path(name).read_text(encoding="utf-8", errors="replace")
    finally:
        os.close(handle)
        os.unlink(name)


def _waits(trace: str) -> int:
    """The client's waits: every turn from messages the client sent (``F``) to messages the
    server sent (``B``). Pipelining sends many statements before one such turn; a client that
    sends, waits and sends again makes one turn per wait. (A client reading results while still
    sending would make more turns than it waits, so this never counts too few.)"""
    turns, last = 0, ""
    for line in trace.splitlines():
        side = line.split("\t", 1)[0]
        if side == "B" and last == "F":
            turns += 1
        if side in ("B", "F"):
            last = side
    return turns


def _an_advance(start_run):
    state, first = start_run()
    # Two commits first: the statements are compiled and the trace head is remembered, as in a
    # worker's steady state.
    second = checkpoint_commit(lease=first.lease, state=advance(state), expected_generation=1,
                               events=[("step", {"n": 1})])
    nxt = advance(advance(state))
    state_ledger(nxt).record_executed(b.executed_for("ik-trips"))
    return second, nxt


def test_it_advances_in_two_main_round_trips_and_one_for_the_mark(start_run):
    second, nxt = _an_advance(start_run)
    if connections[DEFAULT_DB_ALIAS].vendor != "postgresql":
        # No network: nothing is batched, and the advance keeps its transactions.
        with pipelined(DEFAULT_DB_ALIAS) as batched, db_counting() as counts:
            third = checkpoint_commit(lease=second.lease, state=nxt, expected_generation=2,
                                      events=[("write.executed", {"idempotency_key": "ik-trips"})])
        assert (batched, counts.transactions, counts.mark_transactions) == (False, 1, 1)
        assert third.generation == 3
        return
    traces: dict[str, str] = {}
    with ExitStack() as stack:
        stack.enter_context(_protocol_traced(DEFAULT_DB_ALIAS, traces))
        stack.enter_context(_protocol_traced(hwm_alias(), traces))
        third = checkpoint_commit(lease=second.lease, state=nxt, expected_generation=2,
                                  events=[("write.executed", {"idempotency_key": "ik-trips"})])

    assert (_waits(traces[DEFAULT_DB_ALIAS]), _waits(traces[hwm_alias()])) == (
        MAIN_ROUND_TRIPS, MARK_ROUND_TRIPS), traces
    # What the batch wrote is what the statement-by-statement path writes.
    assert Checkpoint.objects.filter(run_id=nxt.identity.run_id, generation=3,
                                     digest=third.digest).count() == 1
    assert LedgerRow.objects.filter(run_id=nxt.identity.run_id, key="ik-trips").count() == 1
    assert TraceEvent.objects.filter(run_id=nxt.identity.run_id,
                                     event_type="write.executed").count() == 1


def test_a_batched_commit_refuses_as_the_statement_by_statement_path_does(start_run):
    from runtime.errors import LeaseLostError, StaleGenerationError
    from runtime.models import Run

    second, nxt = _an_advance(start_run)  # warm: the next commit takes the batched path
    before = (Checkpoint.objects.count(), TraceEvent.objects.count(), LedgerRow.objects.count())

    with pytest.raises(StaleGenerationError):
        checkpoint_commit(lease=second.lease, state=nxt, expected_generation=1)
    stale = replace(second.lease, state_version=second.lease.state_version - 1)
    with pytest.raises(LeaseLostError, match="state version"):
        checkpoint_commit(lease=stale, state=nxt, expected_generation=2)

    # Nothing of either refused commit is stored, and the next good one still commits.
    assert (Checkpoint.objects.count(), TraceEvent.objects.count(), LedgerRow.objects.count()) == before
    third = checkpoint_commit(lease=second.lease, state=nxt, expected_generation=2)
    assert Run.objects.get(run_id=nxt.identity.run_id).generation == third.generation == 3
