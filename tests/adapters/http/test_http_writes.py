"""Stories: the HTTP adapter against a real orders service on loopback (DESIGN.md section 5.8).

An agent's adapter books orders with the run's idempotency key; the counts come from the
service's own SQLite store. Each way an HTTP write can go wrong is one test: host, method and path not
allowed (refused before any request), same key with another payload (the stored receipt comes
back, so the engine freezes the run for review), a request still in flight (409, retried later),
5xx and timeouts (settled by key), a stale fencing token, an expired credential.
"""

from __future__ import annotations

import threading

import pytest

from runtime.errors import (
    FencingTokenError,
    HttpCredentialExpiredError,
    HttpOutcomeUnknownError,
    HttpRequestInFlightError,
    HttpRequestNotAllowedError,
)
from tests.adapters.http.support import OrdersService, no_blobs, order


def _execute(adapter, action, key, token=1):
    return adapter.execute(action, idempotency_key=key, intent_digest=action.intent_digest(),
                           fencing_token=token, blobs=no_blobs)


def test_it_books_one_order_per_key_and_replays_the_stored_response(orders: OrdersService) -> None:
    adapter = orders.adapter()
    action = order()
    before = adapter.observe()
    predicted = adapter.predict_post_state(action, blobs=no_blobs)

    first = _execute(adapter, action, "rk1_a")
    again = _execute(orders.adapter(), action, "rk1_a")

    assert again == first
    assert orders.orders_per_key() == {"rk1_a": 1}
    after = adapter.observe()
    assert after.state_fingerprint == predicted != before.state_fingerprint
    assert after.version == first.environment_version_after == "l1"
    assert adapter.lookup_receipt("rk1_a") == first
    assert adapter.lookup_receipt("rk1_unknown") is None
    assert adapter.receipts() == [first]


@pytest.mark.parametrize(("target", "method", "what"), [
    ("http://203.0.113.7/v1/accounts/acme/orders", "POST", "host"),
    ("/v1/accounts/acme/orders", "DELETE", "method"),
    ("/v1/admin/users", "POST", "path"),
    ("/v1/accounts/acme/orders?force=1", "POST", "query"),
])
def test_it_refuses_a_request_outside_the_allowlist_before_sending_it(
        shared_orders: OrdersService, target: str, method: str, what: str) -> None:
    orders = shared_orders
    adapter = orders.adapter(allowed_methods=["POST", "PUT"])
    action = order(path=target, method=method)

    for call in (lambda: _execute(adapter, action, "rk1_x"),
                 lambda: adapter.predict_post_state(action, blobs=no_blobs),
                 lambda: adapter.dry_run_diff(action, blobs=no_blobs)):
        with pytest.raises(HttpRequestNotAllowedError):
            call()

    assert adapter.lookup_receipt("rk1_x") is None
    assert orders.orders_per_key() == {}


def test_it_refuses_a_personal_field_given_inline(shared_orders: OrdersService) -> None:
    orders = shared_orders
    adapter = orders.adapter()
    action = order()
    action.params["body"]["customer"]["email"] = "someone@example.org"

    with pytest.raises(HttpRequestNotAllowedError) as caught:
        _execute(adapter, action, "rk1_inline")

    assert "someone@example.org" not in str(caught.value)
    assert orders.orders_per_key() == {}


def test_it_hands_back_the_stored_receipt_when_the_key_was_used_with_another_payload(orders: OrdersService) -> None:
    adapter = orders.adapter()
    original = _execute(adapter, order(quantity=1), "rk1_same")
    changed = order(quantity=9)

    receipt = _execute(adapter, changed, "rk1_same")  # the service answers 422

    assert receipt == original
    assert receipt.intent_digest != changed.intent_digest()  # the engine freezes: receipt_conflict
    assert orders.orders_per_key() == {"rk1_same": 1}


def test_it_reports_a_request_still_in_flight_as_retryable(tmp_path, orders: OrdersService) -> None:
    orders.kill()
    orders.start("--hold-seconds", "1.5")
    action = order()
    first: dict = {}
    thread = threading.Thread(target=lambda: first.update(receipt=_execute(orders.adapter(), action, "rk1_slow")))
    thread.start()
    try:
        for _ in range(200):  # wait until the first request holds the claim
            if orders.records_for("rk1_slow"):
                break
            threading.Event().wait(0.01)
        with pytest.raises(HttpRequestInFlightError) as caught:
            _execute(orders.adapter(), action, "rk1_slow")
        assert caught.value.retryable
        with pytest.raises(HttpRequestInFlightError):
            orders.adapter().lookup_receipt("rk1_slow")
    finally:
        thread.join(timeout=30)

    assert orders.adapter().lookup_receipt("rk1_slow") == first["receipt"]  # retried later: settled
    assert orders.orders_per_key() == {"rk1_slow": 1}


def test_it_settles_a_5xx_by_key_instead_of_sending_again(orders: OrdersService) -> None:
    orders.kill()
    orders.start("--fail-after-commit")
    adapter = orders.adapter()
    action = order()

    with pytest.raises(HttpOutcomeUnknownError):
        _execute(adapter, action, "rk1_5xx")

    receipt = adapter.lookup_receipt("rk1_5xx")
    assert receipt is not None and receipt.intent_digest == action.intent_digest()
    assert orders.orders_per_key() == {"rk1_5xx": 1}


def test_it_settles_a_timeout_by_key(orders: OrdersService) -> None:
    orders.kill()
    orders.start("--hold-seconds", "1.0")
    adapter = orders.adapter(timeout_seconds=0.3)
    action = order()

    with pytest.raises(HttpOutcomeUnknownError):
        _execute(adapter, action, "rk1_slow")

    receipt = None
    for _ in range(100):
        try:
            receipt = adapter.lookup_receipt("rk1_slow")
            break
        except HttpRequestInFlightError:
            threading.Event().wait(0.05)
    assert receipt is not None and receipt.idempotency_key == "rk1_slow"
    assert orders.orders_per_key() == {"rk1_slow": 1}


def test_it_refuses_a_stale_fencing_token(orders: OrdersService) -> None:
    adapter = orders.adapter()
    _execute(adapter, order(sku="a"), "rk1_new", token=5)

    with pytest.raises(FencingTokenError):
        _execute(adapter, order(sku="b"), "rk1_old", token=4)

    assert orders.orders_per_key() == {"rk1_new": 1}
    assert adapter.lookup_receipt("rk1_old") is None


def test_it_detects_an_expired_credential_with_a_cheap_probe(orders: OrdersService) -> None:
    adapter = orders.adapter()
    adapter.credentials_check()

    orders.expire_credential()

    with pytest.raises(HttpCredentialExpiredError):
        adapter.credentials_check()
    with pytest.raises(HttpCredentialExpiredError):
        _execute(adapter, order(), "rk1_late")
    assert orders.orders_per_key() == {}
