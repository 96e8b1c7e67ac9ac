"""The same idempotency key with another intent returns the stored receipt and writes nothing:
the engine compares the intent digests and freezes the run for review (DESIGN.md section 6)."""

from __future__ import annotations

from tests.adapters.sql.support import Target, order


def test_it_returns_the_stored_receipt_for_another_intent_and_writes_nothing(target: Target) -> None:
    adapter = target.adapter()
    first = order("o-1", "key-1")
    stored = adapter.execute(first, idempotency_key="key-1", intent_digest=first.intent_digest(),
                             fencing_token=1, blobs=lambda digest: b"")
    other = order("o-2", "key-1", amount=9999)

    answer = adapter.execute(other, idempotency_key="key-1", intent_digest=other.intent_digest(),
                             fencing_token=1, blobs=lambda digest: b"")

    assert answer == stored
    assert answer.intent_digest != other.intent_digest()
    assert target.sql("SELECT order_id FROM orders") == [("o-1",)]
    assert adapter.observe().version == "s1"
