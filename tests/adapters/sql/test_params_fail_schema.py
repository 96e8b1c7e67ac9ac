"""Parameters that fail the template's schema are refused before any connection, and the error
names the fields and problems but never a value (it may be personal data)."""

from __future__ import annotations

import pytest

from runtime.core.checkpoint import Action
from runtime.errors import SqlParamsInvalidError
from tests.adapters.sql.support import CARD, Target, order

GOOD = order("o-1", "key-1").params


@pytest.mark.parametrize(("change", "field"), [
    ({"amount_cents": "500"}, "amount_cents"),            # a string is never taken as a number
    ({"amount_cents": -1}, "amount_cents"),               # below the minimum
    ({"card": {"$secret": "bad_card"}}, "card"),         # the secret input fails the pattern
    ({"order_id": "x" * 41}, "order_id"),                 # too long
    ({"customer": None}, "customer"),                     # not nullable
    ({"extra": "1; DROP TABLE orders"}, "extra"),          # not a declared parameter
])
def test_it_refuses_parameters_the_schema_rejects(sqlite_target: Target, change: dict, field: str) -> None:
    action = Action(kind="record_order", params={**GOOD, **change})

    with pytest.raises(SqlParamsInvalidError) as caught:
        sqlite_target.adapter().execute(action, idempotency_key="key-1", intent_digest=action.intent_digest(),
                                        fencing_token=1, blobs=lambda digest: b"")

    message = str(caught.value)
    assert field in message
    assert CARD not in message and "DROP TABLE" not in message
    assert sqlite_target.receipt_rows() == 0


def test_it_refuses_a_missing_parameter(sqlite_target: Target) -> None:
    params = {k: v for k, v in GOOD.items() if k != "customer"}

    with pytest.raises(SqlParamsInvalidError, match="customer"):
        sqlite_target.adapter().predict_post_state(Action(kind="record_order", params=params),
                                                   blobs=lambda digest: b"")
