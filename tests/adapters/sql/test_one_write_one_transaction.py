"""The SQL adapter applies a template once per idempotency key: the business row, the receipt row
and the fence commit together in the target database, and the target answers every question
about the write afterwards (DESIGN.md section 5.11)."""

from __future__ import annotations

from runtime.core.checkpoint import Action
from tests.adapters.sql.support import Target, order

TOKEN = 3


def _execute(adapter, action: Action, key: str, token: int = TOKEN):
    return adapter.execute(action, idempotency_key=key, intent_digest=action.intent_digest(),
                           fencing_token=token, blobs=lambda digest: b"")


def test_it_commits_the_row_and_its_receipt_together(target: Target) -> None:
    adapter = target.adapter()
    action = order("o-1", "key-1")
    before = adapter.observe()
    predicted = adapter.predict_post_state(action, blobs=lambda digest: b"")

    receipt = _execute(adapter, action, "key-1")

    assert target.rows_for_key("key-1") == 1
    assert target.receipt_rows() == 1
    assert receipt.intent_digest == action.intent_digest()
    assert receipt.fencing_token == TOKEN
    assert receipt.namespace == f"sql:{adapter.instance_id()}"
    assert receipt.result["rowcount"] == 1
    after = adapter.observe()
    assert (before.version, after.version) == ("s0", "s1")
    assert after.version == receipt.environment_version_after
    assert after.state_fingerprint == predicted != before.state_fingerprint


def test_it_reads_the_receipt_back_from_the_target(target: Target) -> None:
    receipt = _execute(target.adapter(), order("o-1", "key-1"), "key-1")

    fresh = target.adapter()  # another worker: nothing cached

    assert fresh.lookup_receipt("key-1") == receipt
    assert fresh.lookup_receipt("key-2") is None
    assert fresh.receipts() == [receipt]


def test_it_returns_the_stored_receipt_for_a_repeated_key(target: Target) -> None:
    adapter = target.adapter()
    action = order("o-1", "key-1")
    first = _execute(adapter, action, "key-1")

    again = _execute(target.adapter(), action, "key-1", token=TOKEN + 1)

    assert again == first
    assert target.rows_for_key("key-1") == 1
    assert adapter.observe().version == "s1"


def test_it_predicts_and_diffs_without_changing_anything(target: Target) -> None:
    adapter = target.adapter()
    action = order("o-1", "key-1")
    before = adapter.observe()

    diff = adapter.dry_run_diff(action, blobs=lambda digest: b"")
    adapter.predict_post_state(action, blobs=lambda digest: b"")

    assert "+++ b/orders" in diff and '"order_id":"o-1"' in diff
    assert adapter.observe() == before
    assert target.rows_for_key("key-1") == 0


def test_it_offers_each_template_as_a_tool_with_its_json_schema(sqlite_target: Target) -> None:
    schemas = sqlite_target.adapter().action_schemas()

    assert sorted(schemas) == ["cancel_order", "record_order"]
    params = schemas["record_order"]["parameters"]
    assert params["additionalProperties"] is False
    assert params["properties"]["amount_cents"] == {"maximum": 1000000, "minimum": 0, "title": "Amount Cents",
                                                    "type": "integer"}
    assert set(params["required"]) == {"order_id", "key", "customer", "card", "amount_cents"}
