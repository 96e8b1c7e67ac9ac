"""A statement the target refuses, or one that changes another number of rows than the template
expects, rolls the whole transaction back: no business row, no receipt, no version step."""

from __future__ import annotations

import pytest

from runtime.core.checkpoint import Action
from runtime.errors import SqlStatementError
from tests.adapters.sql.support import Target


def test_it_rolls_back_a_statement_that_changes_an_unexpected_number_of_rows(target: Target) -> None:
    adapter = target.adapter()
    cancel = Action(kind="cancel_order", params={"order_id": "no-such-order"})

    with pytest.raises(SqlStatementError, match="expects 1"):
        adapter.execute(cancel, idempotency_key="key-1", intent_digest=cancel.intent_digest(), fencing_token=1,
                        blobs=lambda digest: b"")

    assert adapter.lookup_receipt("key-1") is None
    assert adapter.observe().version == "s0"
    assert target.receipt_rows() == 0
