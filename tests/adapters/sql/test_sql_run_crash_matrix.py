"""Story: a whole run through the SQL adapter is SIGKILLed at a crash point and resumed.

A child ``manage.py run`` of a three-order task (a SQLite or PostgreSQL target, the orders planner
loaded by dotted path) SIGKILLs itself at a named crash point of the SQL adapter, the step engine or the checkpoint
protocol (``RATCHET_CRASH_AT``, lease 1 s); a new child ``manage.py resume`` takes the lease
over and finishes. Then, counted in the target database itself: one business row per order,
one receipt row per idempotency key, and no card number in clear in the run's trace or checkpoints
(the actions name a secret input; the adapter shows the column as its keyed digest). The quick
subset kills around the target's commit; ``-m slow`` covers every point the run passes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from runtime.models import Checkpoint, Run, TraceEvent
from tests.adapters.sql.support import CARD, Target, write_orders_task
from tests.helpers.procs import KILLED, child_env, run_manage

pytestmark = pytest.mark.django_db(transaction=True)

ORDERS = ["o-1", "o-2", "o-3"]
QUICK = [("sql.before_commit", 2), ("sql.after_commit", 2)]
SLOW = [("sql.before_write", 1), ("sql.before_commit", 1), ("sql.after_commit", 3), ("engine.after_execute", 1),
        ("engine.before_execute", 2), ("engine.after_receipt_cache", 2), ("engine.after_step_commit", 2),
        ("engine.after_execute", 3), ("checkpoint.after_commit", 3), ("checkpoint.after_append", 3)]


def _rows_per_key(target: Target) -> dict[str, int]:
    rows = target.sql("SELECT idempotency_key, COUNT(*) FROM orders GROUP BY idempotency_key")
    return {**{key: int(count) for key, count in rows}, "receipts": target.receipt_rows()}


def _kill_and_resume(tmp_path: Path, target: Target, point: str, nth: int) -> None:
    task = write_orders_task(tmp_path / "task", target, ORDERS)
    killed = run_manage("run", str(task), "--no-progress",
                        env=child_env(RATCHET_CRASH_AT=f"{point}:{nth}", RATCHET_LEASE_SECONDS="1"))
    assert killed.returncode == KILLED, (killed.returncode, killed.stdout, killed.stderr)
    run_id = re.search(r"run ([0-9a-f]{32})", killed.stdout + killed.stderr).group(1)

    resumed = run_manage("resume", run_id, "--wait", "10", "--no-progress")

    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert Run.objects.get(run_id=run_id).phase == "completed"
    assert _rows_per_key(target) == {**{o: 1 for o in ORDERS}, "receipts": len(ORDERS)}
    leaking = [event for event, payload in TraceEvent.objects.filter(run_id=run_id).values_list("event_type", "payload")
               if CARD in json.dumps(payload)]
    assert leaking == []
    envelopes = Checkpoint.objects.filter(run_id=run_id).values_list("envelope", flat=True)
    assert not any(CARD.encode() in bytes(envelope) for envelope in envelopes)


@pytest.mark.parametrize(("point", "nth"), QUICK, ids=[f"{p}:{n}" for p, n in QUICK])
def test_it_records_each_order_once_after_a_kill_and_resume(tmp_path: Path, target: Target, point: str,
                                                            nth: int) -> None:
    _kill_and_resume(tmp_path, target, point, nth)


@pytest.mark.slow
@pytest.mark.parametrize(("point", "nth"), SLOW, ids=[f"{p}:{n}" for p, n in SLOW])
def test_it_records_each_order_once_after_a_kill_anywhere(tmp_path: Path, target: Target, point: str,
                                                          nth: int) -> None:
    _kill_and_resume(tmp_path, target, point, nth)
