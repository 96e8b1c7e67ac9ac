"""Stories: SIGKILL the worker or the orders service at every HTTP crash point (DESIGN.md sections 5.8, 8).

The worker is a child process executing one write through the HTTP adapter; the service is the
orders API in its own process. Each is armed with one named crash point and SIGKILLs itself
there. A recovering worker (a fresh adapter, nothing cached) then asks the service by key first
and finishes the step with the same key; the service's own SQLite store must hold exactly one
order for the key, and a write that committed before the kill is settled by lookup, never sent
again.
"""

from __future__ import annotations

import signal
import time

import pytest

import runtime.adapters.http.adapter
import runtime.services.orders_service
from runtime.core.crashpoints import CRASH_POINTS
from runtime.errors import HttpOutcomeUnknownError, HttpRequestInFlightError
from tests.adapters.http.support import OrdersService, no_blobs, order, run_child

WORKER_POINTS = {"http.before_request": False, "http.after_response": True}
SERVICE_POINTS = {"orders.after_claim": False, "orders.after_commit": True}


def test_every_http_crash_point_is_registered_and_covered() -> None:
    declared = {value for module in (runtime.adapters.http.adapter, runtime.services.orders_service)
                for name, value in vars(module).items() if name.startswith("CP_")}
    assert declared <= set(CRASH_POINTS)
    assert declared == set(WORKER_POINTS) | set(SERVICE_POINTS)


def _finish(orders: OrdersService, action, key: str):
    """What a recovering worker does: ask by key first, execute with the same key only if nothing is there."""
    adapter = orders.adapter()
    deadline = time.monotonic() + 20
    while True:
        try:
            receipt = adapter.lookup_receipt(key)
            if receipt is not None:
                return receipt, True
            return adapter.execute(action, idempotency_key=key, intent_digest=action.intent_digest(),
                                   fencing_token=2, blobs=no_blobs), False
        except HttpRequestInFlightError:  # a dead claim: retried later, once its lease has passed
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.parametrize(("point", "landed"), sorted(WORKER_POINTS.items()))
def test_a_worker_killed_mid_write_leaves_one_order_per_key(orders: OrdersService, point: str,
                                                            landed: bool) -> None:
    action = order()

    child = run_child(orders, action, "rk1_crash", crash_at=point)

    assert child.returncode == -signal.SIGKILL, child.stderr
    receipt, reconciled = _finish(orders, action, "rk1_crash")
    assert reconciled is landed  # after the response: settled by lookup, never a blind retry
    assert receipt.intent_digest == action.intent_digest()
    assert orders.orders_per_key() == {"rk1_crash": 1}
    assert orders.adapter().observe().version == receipt.environment_version_after == "l1"


@pytest.mark.parametrize(("point", "landed"), sorted(SERVICE_POINTS.items()))
def test_a_service_killed_mid_write_leaves_one_order_per_key(orders: OrdersService, point: str,
                                                             landed: bool) -> None:
    orders.kill()
    orders.start("--claim-seconds", "0.5", crash_at=point)
    adapter = orders.adapter()
    action = order()

    with pytest.raises(HttpOutcomeUnknownError):
        adapter.execute(action, idempotency_key="rk1_svc", intent_digest=action.intent_digest(), fencing_token=1,
                        blobs=no_blobs)

    assert orders.wait_killed() == -signal.SIGKILL
    orders.start("--claim-seconds", "0.5")
    receipt, reconciled = _finish(orders, action, "rk1_svc")
    assert reconciled is landed
    assert orders.orders_per_key() == {"rk1_svc": 1}
    assert receipt.environment_version_after == "l1"
