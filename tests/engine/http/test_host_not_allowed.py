"""Story: a step names a host the adapter's options do not allow; refused before any request.

DESIGN.md section 5.8: hosts, methods and path templates come from the task spec; anything else
is refused before a request is made. The scripted step is well-formed (it fits the action schema,
so the spec loads), but its URL names another port on loopback where the test listens itself:
the run freezes with the adapter's typed refusal, nobody ever connects to that listener, and the
allowed service holds no order and no idempotency record.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from tests.adapters.http.support import OrdersService
from tests.engine.http.support import ORDERS_PATH, order_steps, write_orders_task
from tests.engine.support import restore, trace_types
from tests.helpers.listener import connections, loopback_listener


@pytest.fixture
def other_host() -> Iterator[socket.socket]:
    """A listener on another loopback port: any request to it would show up as a connection."""
    with loopback_listener() as listener:
        yield listener


@pytest.mark.django_db(transaction=True)
def test_it_refuses_a_host_not_allowed_before_any_request(
        tmp_path: Path, orders: OrdersService, secrets_in_env: None, other_host: socket.socket) -> None:
    port = other_host.getsockname()[1]
    steps = order_steps(1, target=f"http://127.0.0.1:{port}{ORDERS_PATH}")
    run_id = run_start(spec_path=write_orders_task(tmp_path, orders, steps=steps))

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("needs_review", "adapter_refused")
    detail = restore(run_id).state.stop_detail or ""
    assert detail.startswith("HttpRequestNotAllowedError: host not in the adapter's allowed_hosts"), detail
    assert "intent.proposed" not in trace_types(run_id)
    assert connections(other_host) == 0  # the host that is not allowed saw no request at all
    assert orders.orders_per_key() == {} and orders.adapter().receipts() == []
