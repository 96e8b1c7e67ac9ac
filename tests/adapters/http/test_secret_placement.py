"""Story: a ``{"$secret": NAME}`` placeholder outside the redacted paths (N3, DESIGN.md section 5.9).

Before, the adapter resolved a placeholder anywhere in a body, so a secret placed outside
``redact_json_paths`` reached the idempotency cache, the ledger, the trace and the evidence
bundle in clear. Now a secret may only stand at a redacted path (or below one): anywhere else the
action is refused with a typed error before any request is built or sent, naming the JSON path.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.adapters.http.requests import _covered
from runtime.core.checkpoint import Action
from runtime.errors import HttpRequestNotAllowedError
from tests.adapters.http.support import ACCOUNT, EMAIL_ENV, OrdersService, no_blobs, order


def _order_with_secret_at(where: str) -> Action:
    body = {"sku": "tea-001", "quantity": 2, "customer": {"name": "Ada", "email": {"$secret": "customer_email"}}}
    if where == "note":
        body["note"] = {"$secret": "customer_email"}
    elif where == "nested":
        body["customer"]["name"] = {"$secret": "customer_email"}
    elif where == "list":
        body["tags"] = ["x", {"$secret": "customer_email"}]
    return Action(kind="http_request", target=f"/v1/accounts/{ACCOUNT}/orders",
                  params={"method": "POST", "body": body})


@pytest.mark.parametrize("where", ["note", "nested", "list"])
def test_n3_it_refuses_a_secret_placeholder_outside_the_redacted_paths(orders: OrdersService, where: str) -> None:
    adapter = orders.adapter()
    action = _order_with_secret_at(where)

    for attempt in (lambda: adapter.dry_run_diff(action, blobs=no_blobs),
                    lambda: adapter.execute(action, idempotency_key=f"rk_{where}", fencing_token=1,
                                            intent_digest=action.intent_digest(), blobs=no_blobs)):
        with pytest.raises(HttpRequestNotAllowedError, match="redact") as caught:
            attempt()
        assert orders.env[EMAIL_ENV] not in str(caught.value)
    assert orders.orders_per_key() == {}


def test_it_still_resolves_a_secret_at_a_redacted_path(orders: OrdersService) -> None:
    adapter = orders.adapter()
    action = order()
    receipt = adapter.execute(action, idempotency_key="rk_ok", fencing_token=1,
                              intent_digest=action.intent_digest(), blobs=no_blobs)
    assert orders.env[EMAIL_ENV] not in receipt.model_dump_json()


@settings(max_examples=200, deadline=None)
@given(path=st.lists(st.sampled_from(["a", "b", "0", "1"]), min_size=1, max_size=4),
       pattern=st.lists(st.sampled_from(["a", "b", "0", "*"]), min_size=1, max_size=4))
def test_a_redacted_path_covers_exactly_the_paths_below_it(path: list[str], pattern: list[str]) -> None:
    expected = len(pattern) <= len(path) and all(p == "*" or p == c for p, c in zip(pattern, path, strict=False))
    assert _covered(tuple(path), tuple(pattern)) is expected


def test_scrub_text_replaces_every_secret_value_in_free_text() -> None:
    """The last line of defence for error messages and diffs: a no-op here must fail a test."""
    from runtime.adapters.redaction import RedactionKey, Redactor

    redactor = Redactor.build(key=RedactionKey(key_id="k1", secret=b"s" * 32))
    text = "POST failed for ada@example.org with token tok-123456 (again: tok-123456)"

    scrubbed = redactor.scrub_text(text, ["ada@example.org", "tok-123456", "abc"])

    assert "ada@example.org" not in scrubbed and "tok-123456" not in scrubbed
    assert redactor.value_digest("tok-123456") in scrubbed
    assert scrubbed.count(redactor.value_digest("tok-123456")) == 2
