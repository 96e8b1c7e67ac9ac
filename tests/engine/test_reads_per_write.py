"""What a steady write reads besides its commit (DESIGN.md sections 3, 4.5 and 4.13).

In a run that writes steadily, a folded write's commit is one pipelined batch plus the mark;
around it the step reads only what it cannot know otherwise: whether an operator asked for a
cancel, the receipt cache for the new key (once: the settle step does not read it again), and
the ledger for the new key (one read for the executed, quarantined and denied kinds). The
lease check before the adapter call reads nothing while the last commit's renewal is fresh,
and storing an attachment inside a commit does not ask whether its row exists.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from runtime.checkpoints.session import run_session, session_lease_check
from runtime.engine import run_advance, run_start
from runtime.errors import LeaseLostError
from runtime.models import Run
from runtime.ownership.heartbeats import LeaseHeartbeat
from tests.engine.support import write_scripted_task
from tests.helpers.db_counts import db_counting

pytestmark = pytest.mark.django_db(transaction=True)

WRITES = 6


def _selects(sql: list[str], table: str) -> int:
    return sum(1 for s in sql if s.lstrip().upper().startswith("SELECT") and f'FROM "{table}"' in s)


def test_a_steady_write_reads_the_cancel_flag_the_receipt_cache_and_the_ledger_once_each(tmp_path: Path):
    steps = [{"target": f"data/f{n}.txt", "content": f"step {n}\n"} for n in range(WRITES)]
    run_id = run_start(spec_path=write_scripted_task(tmp_path, steps=steps))
    run_advance(run_id=run_id, max_steps=3)  # the session's first write pays its restore

    marks: list[int] = []
    with db_counting() as counts:
        run_advance(run_id=run_id, max_steps=3, on_step=lambda _r: marks.append(len(counts.sql)))
    # A second session restores once; the steps after its first are steady folded writes.
    steady = counts.sql[marks[0]:marks[-1]]
    writes = len(marks) - 1

    assert writes == 2
    assert _selects(steady, "runtime_attachment") == 0
    assert _selects(steady, "runtime_idempotencyrecord") == writes
    assert _selects(steady, "runtime_ledgerentry") == writes
    lease_reads = [s for s in steady if s.lstrip().upper().startswith("SELECT")
                   and 'FROM "runtime_run"' in s and "owner_worker" in s]
    assert lease_reads == []
    assert _selects(steady, "runtime_run") == writes  # the cancel flag, once per step


def test_the_lease_check_reads_only_once_the_renewal_is_half_gone(tmp_path: Path, django_assert_num_queries):
    run_id = run_start(spec_path=write_scripted_task(tmp_path))
    with run_session(run_id=run_id, worker="w-check") as session:
        session.held_until = 0.0  # no commit of this session yet: the database is asked
        with django_assert_num_queries(1):
            session_lease_check(session)

        session.held_until = time.monotonic() + session.ttl  # a commit just renewed it
        with django_assert_num_queries(0):
            session_lease_check(session)

        # Taken over behind the session's back (a stalled holder): the local bound still says
        # held, so nothing is read (the adapter's fence and the commit's fence refuse the write),
        # and once the bound is half gone the read reports the loss.
        Run.objects.filter(run_id=run_id).update(lease_version=session.lease.lease_version + 1,
                                                 owner_worker="w-other")
        session_lease_check(session)
        session.held_until = time.monotonic() + session.ttl / 2 - 0.001
        with pytest.raises(LeaseLostError):
            session_lease_check(session)
        # Given back, so the session's own release at the end of the block finds its lease.
        Run.objects.filter(run_id=run_id).update(lease_version=session.lease.lease_version,
                                                 owner_worker="w-check")


def test_every_call_of_a_process_beats_on_one_heartbeat_thread(tmp_path: Path):
    run_id = run_start(spec_path=write_scripted_task(tmp_path))
    with run_session(run_id=run_id, worker="w-beat", ttl_seconds=0.9) as session:
        for _ in range(3):
            with LeaseHeartbeat(session.lease, ttl_seconds=0.9, max_seconds=60) as beat:
                deadline = time.monotonic() + 30
                while beat.beats < 1 and time.monotonic() < deadline:
                    time.sleep(0.02)
            assert beat.beats >= 1 and not beat.lost.is_set()
            session.lease = beat.lease
    threads = [t for t in threading.enumerate() if t.name == "lease-heartbeats"]
    assert len(threads) == 1
