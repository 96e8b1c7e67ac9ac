"""A receipt table that was dropped (or receipt rows that were deleted) fails closed: lookup,
execute, predictions and a freshly opened adapter raise a typed error instead of reading "no
receipt" and executing again, and the tables are never silently re-created (DESIGN.md section 5.11)."""

from __future__ import annotations

import pytest

from runtime.errors import AdapterStoreCorruptError, SqlReceiptStoreMissingError
from tests.adapters.sql.support import Target, order


def _write(adapter, action, key: str):
    return adapter.execute(action, idempotency_key=key, intent_digest=action.intent_digest(), fencing_token=1,
                           blobs=lambda digest: b"")


def _tables(target: Target) -> list[tuple]:
    if target.kind == "sqlite":
        return target.sql("SELECT name FROM sqlite_master WHERE type = 'table'")
    return target.sql("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")


def test_it_fails_closed_when_the_receipt_table_is_dropped(target: Target) -> None:
    adapter = target.adapter()
    action = order("o-1", "key-1")
    _write(adapter, action, "key-1")

    target.sql("DROP TABLE ratchet_sql_receipts")

    with pytest.raises(SqlReceiptStoreMissingError) as caught:
        adapter.lookup_receipt("key-1")
    assert caught.value.retryable is False
    with pytest.raises(SqlReceiptStoreMissingError):
        _write(adapter, action, "key-1")
    with pytest.raises(SqlReceiptStoreMissingError):
        _write(adapter, order("o-2", "key-2"), "key-2")
    with pytest.raises(SqlReceiptStoreMissingError):
        adapter.predict_post_state(order("o-2", "key-2"), blobs=lambda digest: b"")
    fresh = target.adapter()  # a new worker does not re-create an empty receipt table either
    with pytest.raises(SqlReceiptStoreMissingError):
        fresh.lookup_receipt("key-1")
    assert "ratchet_sql_receipts" not in {row[0] for row in _tables(target)}
    assert target.rows_for_key("key-1") == 1
    assert target.rows_for_key("key-2") == 0


def test_it_fails_closed_when_receipt_rows_are_deleted(target: Target) -> None:
    adapter = target.adapter()
    _write(adapter, order("o-1", "key-1"), "key-1")

    target.sql("DELETE FROM ratchet_sql_receipts")

    with pytest.raises(AdapterStoreCorruptError, match="version counter"):
        adapter.lookup_receipt("key-1")
    assert target.rows_for_key("key-1") == 1
