"""Story: SIGKILL the worker or the orders service at every crash point of an HTTP run; one order per key.

DESIGN.md sections 5.3, 5.8 and 8. A child ``manage.py run`` of a scripted task placing
:data:`ORDERS` orders through the HTTP adapter is killed at one named point
(``RATCHET_CRASH_AT=<point>:<nth>``, lease 1 s): an engine point around a write, a checkpoint
commit point (the first hit is the run's creation, so their first case is the second hit), the
adapter's own points, or -- armed in the *service's* process instead -- the service's points
between claiming a key and answering. Another child ``manage.py resume`` then takes the run over
(the service restarted when it was the one killed) and finishes it. From the service's own
SQLite store: exactly one order per derived idempotency key and nothing else; the run completed
and its trace verifies.

External kills too: a worker SIGKILLed by the test at a seeded random moment of the run.

The default run takes a handful of points at their first hit; ``-m slow`` runs every point at
its first and (where a run hits it three times or more) third hit, and the random kills.
Parametrised, so the same cases run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import io
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from django.core.management import call_command

import runtime.adapters.http.adapter
import runtime.checkpoints.protocol
import runtime.checkpoints.transaction
import runtime.engine.complete
import runtime.engine.execute
import runtime.engine.propose
import runtime.engine.settle
import runtime.services.orders_service  # noqa: F401 - registers the service's crash points
from runtime.core.crashpoints import CRASH_POINTS
from runtime.engine import run_advance, run_start
from tests.adapters.http.support import EMAIL_ENV, TOKEN_ENV, OrdersService
from tests.engine.http.support import (
    http_child_env,
    manage_resume,
    manage_run,
    run_id_of,
    run_keys,
    run_phase,
    write_orders_task,
)
from tests.engine.support import crash_point_hits
from tests.helpers.procs import KILLED, MANAGE, ROOT

ORDERS = 3

WORKER_HITS = {
    # the first proposal, one inside each receipt's step (one commit per write, DESIGN.md section
    # 4.13), and the last one asked again by the step after the receipt that answered "done"
    "engine.before_propose": ORDERS + 2,
    "engine.after_intent_commit": ORDERS,
    "engine.before_execute": ORDERS,
    "engine.after_execute": ORDERS,
    "engine.after_receipt_cache": ORDERS,
    "engine.after_step_commit": ORDERS,
    "engine.before_verify": 1,
    "http.before_request": ORDERS,
    "http.after_response": ORDERS,
    # creation + the first intent + one folded commit (receipt N, intent N+1) per order but the
    # last + the last receipt + completion
    **{p: ORDERS + 3 for p in ("checkpoint.after_ledger_rows", "checkpoint.after_append",
                                   "checkpoint.before_hwm_cas", "checkpoint.after_commit",
                                   "checkpoint.after_hwm_cas")},
}
"""How often an uninterrupted HTTP run of :data:`ORDERS` orders hits each point in the worker."""

SERVICE_HITS = {"orders.after_claim": ORDERS, "orders.after_commit": ORDERS}
"""The service's points, hit once per order in the service's own process."""

QUICK = {"engine.after_intent_commit", "http.after_response", "engine.after_execute", "orders.after_commit"}
"""The handful of points the default run covers (first hit): the intent committed and nothing sent;
the service answered and no receipt saved (crash window 3); the receipt returned and nothing
persisted; the service died after its commit, before answering."""


def _cases() -> list:
    cases = []
    for point, count in sorted({**WORKER_HITS, **SERVICE_HITS}.items()):
        first = 2 if point.startswith("checkpoint.") else 1  # hit 1 is the run's creation commit
        marks = () if point in QUICK else (pytest.mark.slow,)
        cases.append(pytest.param(point, first, id=f"{point}:{first}", marks=marks))
        if count >= 3:
            cases.append(pytest.param(point, 3, id=f"{point}:3", marks=pytest.mark.slow))
    return cases


def _manage(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def _resume_until_done(run_id: str, orders: OrdersService) -> int:
    """Resume in new processes (at most three) until the run completes; returns how many ran."""
    for attempt in range(1, 4):
        resumed = manage_resume(run_id, orders)  # the default lease: a loaded machine's step outlasts 1 s
        if resumed.returncode == 0 and "verdict: completed" in resumed.stdout:
            return attempt
    raise AssertionError(f"run {run_id} did not complete after 3 resumes:\n{resumed.stdout}\n{resumed.stderr}")


def _assert_one_order_per_key(run_id: str, orders: OrdersService) -> None:
    assert run_phase(run_id)[0] == "completed"
    assert orders.orders_per_key() == dict.fromkeys(run_keys(run_id, ORDERS), 1)
    assert orders.adapter().observe().version == f"l{ORDERS}"
    assert "trace hash chain verifies" in _manage("trace", run_id)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("point", "nth"), _cases())
def test_it_places_each_order_exactly_once_after_a_kill(tmp_path: Path, orders: OrdersService, point: str,
                                                        nth: int) -> None:
    task = write_orders_task(tmp_path, orders, count=ORDERS)
    in_service = point in SERVICE_HITS
    if in_service:  # the service kills itself; a short claim lease lets the retry take its claim over
        orders.kill()
        orders.start("--claim-seconds", "0.5", crash_at=f"{point}:{nth}")
        first = manage_run(task, orders, RATCHET_LEASE_SECONDS="3")
        assert orders.wait_killed() == KILLED
        assert first.returncode != 0  # the worker cannot reach the service any more: it stops, retryable
        orders.start("--claim-seconds", "0.5")
    else:
        first = manage_run(task, orders, RATCHET_CRASH_AT=f"{point}:{nth}", RATCHET_LEASE_SECONDS="3")
        assert first.returncode == KILLED, (first.returncode, first.stdout, first.stderr)
    run_id = run_id_of(first)

    _resume_until_done(run_id, orders)

    _assert_one_order_per_key(run_id, orders)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("seed", [11, 23, 37])
def test_it_places_each_order_exactly_once_after_random_kills(tmp_path: Path, orders: OrdersService,
                                                              seed: int) -> None:
    task = write_orders_task(tmp_path, orders, count=ORDERS)
    delay = random.Random(seed).uniform(0.0, 3.0)  # seconds after the run id is announced
    proc = subprocess.Popen([sys.executable, str(MANAGE), "run", str(task), "--no-progress"], cwd=ROOT,
                            env=http_child_env(orders, RATCHET_LEASE_SECONDS="3"), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    time.sleep(delay)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)  # only the child this test started, by its pid
    proc.wait(timeout=60)
    if proc.stdout:
        proc.stdout.close()
    run_id = line.strip().removeprefix("run ")

    if run_phase(run_id)[0] != "completed":
        _resume_until_done(run_id, orders)

    _assert_one_order_per_key(run_id, orders)


def _count_hits(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    return crash_point_hits(monkeypatch, (
        runtime.engine.propose, runtime.engine.execute, runtime.engine.settle, runtime.engine.complete,
        runtime.checkpoints.transaction, runtime.checkpoints.protocol, runtime.adapters.http.adapter))


@pytest.mark.django_db(transaction=True)
def test_it_covers_every_crash_point_an_http_run_hits(tmp_path: Path, orders: OrdersService,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (TOKEN_ENV, EMAIL_ENV, "RATCHET_REDACTION_KEY"):
        monkeypatch.setenv(name, orders.env[name])
    hits = _count_hits(monkeypatch)

    run_id = run_start(spec_path=write_orders_task(tmp_path, orders, count=ORDERS))
    assert run_advance(run_id=run_id).phase == "completed"

    assert dict(hits) == WORKER_HITS  # every point the worker hits is in the matrix, with its count
    assert set(WORKER_HITS) | set(SERVICE_HITS) <= set(CRASH_POINTS)
    assert orders.orders_per_key() == dict.fromkeys(run_keys(run_id, ORDERS), 1)
