"""Story: the HTTP adapter's credential goes only to the service it was issued for (N2).

Before, an action could name any scheme, port or listed host, and the bearer credential went
with it: ``http://`` when the base URL is ``https://``, another port of a host listed without
one, another listed host. Now an action may name only the base URL's service (scheme, host and
port, the default port made explicit); anything else is refused before a connection is opened,
and a listener on another loopback port never sees the credential.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from runtime.adapters.http.requests import service_of
from runtime.errors import HttpRequestNotAllowedError
from tests.adapters.http.support import ACCOUNT, OrdersService, no_blobs, order
from tests.helpers.listener import connections, loopback_listener

PATH = f"/v1/accounts/{ACCOUNT}/orders"


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback listener that would receive a misdirected request."""
    with loopback_listener() as sock:
        yield sock


def test_n2_it_refuses_another_port_of_a_listed_host_and_sends_nothing(orders: OrdersService,
                                                                      listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    adapter = orders.adapter(allowed_hosts=["127.0.0.1"])  # listed without a port
    action = order(path=f"http://127.0.0.1:{port}{PATH}")

    with pytest.raises(HttpRequestNotAllowedError, match="service of the adapter's base URL"):
        adapter.execute(action, idempotency_key="rk_port", intent_digest=action.intent_digest(),
                        fencing_token=1, blobs=no_blobs)

    assert connections(listener) == 0
    assert orders.orders_per_key() == {}


def test_n2_it_refuses_another_scheme_of_the_base_host(orders: OrdersService) -> None:
    adapter = orders.adapter()
    base_port = int(adapter.base_url.rsplit(":", 1)[1])
    action = order(path=f"https://127.0.0.1:{base_port}{PATH}")

    with pytest.raises(HttpRequestNotAllowedError, match="service of the adapter's base URL"):
        adapter.dry_run_diff(action, blobs=no_blobs)


def test_it_accepts_the_base_service_named_in_full(orders: OrdersService) -> None:
    adapter = orders.adapter()
    action = order(path=f"{adapter.base_url}{PATH}")
    receipt = adapter.execute(action, idempotency_key="rk_full", intent_digest=action.intent_digest(),
                              fencing_token=1, blobs=no_blobs)
    assert receipt.idempotency_key == "rk_full"


@pytest.mark.parametrize(("scheme", "netloc", "service"), [
    ("https", "api.example.org", ("https", "api.example.org", 443)),
    ("https", "API.example.org:443", ("https", "api.example.org", 443)),
    ("http", "api.example.org", ("http", "api.example.org", 80)),
    ("http", "127.0.0.1:8080", ("http", "127.0.0.1", 8080)),
    ("https", "[::1]:8443", ("https", "::1", 8443)),
])
def test_it_names_a_service_with_its_port_made_explicit(scheme: str, netloc: str, service: tuple) -> None:
    assert service_of(scheme, netloc) == service
