"""The HTTP adapter's commit point is the service's: it checks an approved write's deadline
immediately before sending and tells the service the seconds left (DESIGN.md section 5.5)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runtime.adapters.deadline import CommitDeadline
from runtime.errors import CommitDeadlinePassedError
from tests.adapters.http.support import OrdersService, no_blobs, order


def _execute(adapter, action, key, deadline):
    return adapter.execute(action, idempotency_key=key, intent_digest=action.intent_digest(),
                           fencing_token=1, blobs=no_blobs, not_after=deadline)


def test_it_sends_nothing_once_the_deadline_has_passed(orders: OrdersService) -> None:
    adapter = orders.adapter()
    adapter.observe()
    late = CommitDeadline(not_after=datetime.now(UTC) - timedelta(seconds=1), clock_offset=timedelta(0))

    with pytest.raises(CommitDeadlinePassedError):
        _execute(adapter, order(), "rk-late", late)

    assert orders.records_for("rk-late") == []
    assert adapter.lookup_receipt("rk-late") is None


def test_it_writes_before_the_deadline(orders: OrdersService) -> None:
    deadline = CommitDeadline(not_after=datetime.now(UTC) + timedelta(minutes=5), clock_offset=timedelta(0))
    receipt = _execute(orders.adapter(), order(), "rk-on-time", deadline)
    assert orders.orders_per_key() == {"rk-on-time": 1}
    assert receipt.idempotency_key == "rk-on-time"
