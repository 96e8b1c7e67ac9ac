"""Configured columns never leave the SQL adapter in clear: receipts, observations (attachment and
fingerprint input), dry-run diffs and errors carry a keyed digest instead, and equal values show
equal digests so a reviewer can still compare them. Actions never hold such a value: they name a
secret input, resolved from the environment when the statement runs (DESIGN.md section 5.9)."""

from __future__ import annotations

import pytest

from runtime.adapters.redaction import REDACTED_PREFIX
from runtime.errors import SqlParamsInvalidError, SqlStatementError
from tests.adapters.sql.support import CARD, OTHER_CARD, Target, order


def _write(adapter, action, key: str):
    return adapter.execute(action, idempotency_key=key, intent_digest=action.intent_digest(), fencing_token=1,
                           blobs=lambda digest: b"")


def test_it_never_shows_a_redacted_column_in_clear(target: Target) -> None:
    adapter = target.adapter()
    first = order("o-1", "key-1")
    diff = adapter.dry_run_diff(first, blobs=lambda digest: b"")

    receipt = _write(adapter, first, "key-1")
    observed = adapter.observe()

    evidence = [receipt.model_dump_json(), diff, observed.attachments["rows.jsonl"].decode()]
    evidence.append(target.sql("SELECT receipt FROM ratchet_sql_receipts")[0][0])
    for text in evidence:
        assert CARD not in text
        assert REDACTED_PREFIX in text
    assert target.sql("SELECT card FROM orders") == [(CARD,)]  # the business row keeps the value


def test_it_shows_equal_digests_for_equal_values(target: Target) -> None:
    adapter = target.adapter()
    one = _write(adapter, order("o-1", "key-1"), "key-1")
    two = _write(adapter, order("o-2", "key-2"), "key-2")
    other = _write(adapter, order("o-3", "key-3", card="other_card"), "key-3")

    digests = [r.result["rows"][0]["card"] for r in (one, two, other)]

    assert digests[0] == digests[1] != digests[2]
    assert all(d.startswith(REDACTED_PREFIX + "redact-test:") for d in digests)


def test_it_keeps_values_out_of_database_errors(target: Target) -> None:
    adapter = target.adapter()
    _write(adapter, order("o-1", "key-1"), "key-1")

    with pytest.raises(SqlStatementError) as caught:  # the primary key refuses a second o-1
        _write(adapter, order("o-1", "key-2", card="other_card"), "key-2")

    assert OTHER_CARD not in str(caught.value) and "o-1" not in str(caught.value)



def test_it_refuses_a_secret_value_inline_in_an_action(sqlite_target: Target) -> None:
    inline = order("o-1", "key-1").model_copy(update={"params": {**order("o-1", "key-1").params, "card": CARD}})

    with pytest.raises(SqlParamsInvalidError, match="secret") as caught:
        sqlite_target.adapter().execute(inline, idempotency_key="key-1", intent_digest=inline.intent_digest(),
                                        fencing_token=1, blobs=lambda digest: b"")

    assert CARD not in str(caught.value)
    assert sqlite_target.receipt_rows() == 0


@pytest.mark.parametrize(("card", "problem"), [("nobody", "names no secret input"), ("bad_card", "pattern")])
def test_it_refuses_an_unknown_or_invalid_secret_input(sqlite_target: Target, card: str, problem: str) -> None:
    action = order("o-1", "key-1", card=card)

    with pytest.raises(SqlParamsInvalidError, match=problem) as caught:
        sqlite_target.adapter().predict_post_state(action, blobs=lambda digest: b"")

    assert "4111-1111" not in str(caught.value)


def test_it_describes_a_secret_parameter_to_a_model_as_a_placeholder(sqlite_target: Target) -> None:
    schema = sqlite_target.adapter().action_schemas()["record_order"]["parameters"]["properties"]["card"]

    assert schema["properties"] == {"$secret": {"enum": ["bad_card", "card", "other_card"]}}
