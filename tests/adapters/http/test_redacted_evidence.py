"""Stories: secrets and personal fields never reach stored evidence (DESIGN.md section 5.9).

The redactor's contract (equal values give equal digests, the key never shows), and the bytes
the HTTP adapter hands the engine -- receipts, dry-run text, observations -- grepped for the
bearer token, the customer's e-mail and the service's payment token.
"""

from __future__ import annotations

import base64
import json
import sqlite3

from runtime.adapters.redaction import REDACTED_PREFIX, RedactionKey, Redactor, redaction_key_load
from tests.adapters.http.support import CUSTOMER_EMAIL, TOKEN_ENV, OrdersService, no_blobs, order

KEY = RedactionKey(key_id="k1", secret=b"s" * 32)


def test_it_gives_equal_values_equal_digests_and_hides_the_key() -> None:
    redactor = Redactor.build(key=KEY, json_paths=["customer.email", "items.*.card"])
    doc = {"customer": {"email": "a@example.org"}, "items": [{"card": "4111"}, {"card": "4111"}]}

    out = redactor.redact_json(doc)

    assert out["customer"]["email"].startswith(REDACTED_PREFIX + "k1:")
    assert out["items"][0]["card"] == out["items"][1]["card"] != "4111"
    assert doc["customer"]["email"] == "a@example.org"  # the input is not changed
    other = Redactor.build(key=RedactionKey(key_id="k2", secret=b"t" * 32))
    assert other.value_digest("4111") != redactor.value_digest("4111")
    assert redactor.redact_headers({"AUTHORIZATION": "Bearer x"})["AUTHORIZATION"].startswith(REDACTED_PREFIX)
    assert "s" * 32 not in repr(redactor) and base64.b64encode(b"s" * 32).decode() not in repr(redactor)


def test_it_loads_the_key_from_the_environment_or_an_owner_only_file(tmp_path) -> None:
    env = {"RATCHET_REDACTION_KEY_FILE": str(tmp_path / "redaction.key")}
    first = redaction_key_load(environ=env)
    assert redaction_key_load(environ=env) == first
    assert (tmp_path / "redaction.key").stat().st_mode & 0o777 == 0o600
    explicit = redaction_key_load(environ={"RATCHET_REDACTION_KEY": "ops1:" + base64.b64encode(b"x" * 32).decode()})
    assert explicit.key_id == "ops1"


def test_it_keeps_the_bearer_token_and_personal_fields_out_of_receipts(orders: OrdersService) -> None:
    adapter = orders.adapter()
    action = order()
    evidence = [adapter.dry_run_diff(action, blobs=no_blobs)]
    receipt = adapter.execute(action, idempotency_key="rk1_r", intent_digest=action.intent_digest(),
                              fencing_token=1, blobs=no_blobs)
    evidence += [receipt.model_dump_json(), action.model_dump_json(), repr(adapter.observe())]
    with sqlite3.connect(orders.db) as conn:
        stored = json.loads(conn.execute("SELECT response FROM idempotency").fetchone()[0])
    payment_token = stored["body"]["payment_token"]

    blob = "\n".join(evidence)
    for secret in (orders.env[TOKEN_ENV], CUSTOMER_EMAIL, payment_token):
        assert secret not in blob
    assert receipt.result["body"]["customer"]["email"] == adapter.redactor.value_digest(CUSTOMER_EMAIL)
