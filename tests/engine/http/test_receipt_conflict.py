"""Story: the service already holds our idempotency key with another payload (DESIGN.md sections 5.8, 6.3).

Another client used the run's derived key first, with another order. Whether the engine finds
that record when it asks by key first, or the other client gets in between that lookup and our
request (the service then answers 422), the run never claims the write happened: it freezes in
``needs_review`` with a ``receipt_conflict`` review case that keeps the pending intent and the
service's stored receipt, and the service still holds only the other client's order.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

import runtime.engine.execute
from runtime.engine import run_advance, run_start
from runtime.engine.execute import CP_BEFORE_EXECUTE
from tests.adapters.http.support import OrdersService
from tests.engine.http.support import ORDERS_PATH, run_keys, write_orders_task
from tests.engine.support import restore, trace_events, trace_types


def _seed(orders: OrdersService, key: str) -> int:
    """Another client places a different order under ``key``; returns the service's status code."""
    body = {"sku": "coffee-999", "quantity": 7, "customer": {"name": "Mallory", "email": "m@example.org"}}
    response = httpx.post(f"http://127.0.0.1:{orders.port}{ORDERS_PATH}", json=body, timeout=5,
                          headers={"Idempotency-Key": key, "Authorization": f"Bearer {orders.token}"})
    return response.status_code


def _assert_frozen_with_conflict_case(run_id: str, orders: OrdersService) -> None:
    (key,) = run_keys(run_id, 1)
    state = restore(run_id).state
    assert (state.phase, state.stop_reason) == ("needs_review", "receipt_conflict")
    assert state.pending is not None and state.pending.idempotency_key == key
    (case,) = state.review_cases
    assert (case.reason, case.idempotency_key, case.intent_digest) == ("receipt_conflict", key,
                                                                        state.pending.intent_digest)
    assert case.receipt is not None and case.receipt.intent_digest != state.pending.intent_digest
    assert case.receipt.result["body"]["sku"] == "coffee-999"  # the other client's order, as stored
    (opened,) = trace_events(run_id, "review.opened")
    assert opened["reason"] == "receipt_conflict"
    assert "write.executed" not in trace_types(run_id) and "write.reconciled" not in trace_types(run_id)
    assert orders.orders_per_key() == {key: 1}  # only the other client's order, never ours as well


@pytest.mark.django_db(transaction=True)
def test_it_freezes_when_the_service_already_holds_our_key_for_another_payload(
        tmp_path: Path, orders: OrdersService, secrets_in_env: None) -> None:
    run_id = run_start(spec_path=write_orders_task(tmp_path, orders, count=2))
    assert run_advance(run_id=run_id, max_steps=1).phase == "pending"  # the intent is committed
    assert _seed(orders, run_keys(run_id, 1)[0]) == 201

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("needs_review", "receipt_conflict")
    _assert_frozen_with_conflict_case(run_id, orders)


@pytest.mark.django_db(transaction=True)
def test_it_freezes_on_a_422_for_our_key(tmp_path: Path, orders: OrdersService, secrets_in_env: None,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = run_start(spec_path=write_orders_task(tmp_path, orders, count=2))
    statuses: list[int] = []
    original_point, original_request = runtime.engine.execute.crash_point, httpx.Client.request

    def other_client_first(name: str) -> None:
        # The other client gets in after the engine's lookup by key found nothing, before our POST.
        if name == CP_BEFORE_EXECUTE and not statuses:
            statuses.append(_seed(orders, run_keys(run_id, 1)[0]))
        original_point(name)

    def seen(self: httpx.Client, method: str, url: str, **kwargs: object) -> httpx.Response:
        response = original_request(self, method, url, **kwargs)  # type: ignore[arg-type]
        if method == "POST" and "Ratchet-Intent-Digest" in (kwargs.get("headers") or {}):  # ours, not the seed
            statuses.append(response.status_code)
        return response

    monkeypatch.setattr(runtime.engine.execute, "crash_point", other_client_first)
    monkeypatch.setattr(httpx.Client, "request", seen)

    report = run_advance(run_id=run_id)

    assert statuses == [201, 422]  # the other client's order, then the service's answer to ours
    assert (report.phase, report.stop_reason) == ("needs_review", "receipt_conflict")
    _assert_frozen_with_conflict_case(run_id, orders)
