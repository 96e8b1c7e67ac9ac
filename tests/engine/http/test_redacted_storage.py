"""Story: no token or secret value reaches the Ratchet database (DESIGN.md section 5.9).

A run places three orders through the HTTP adapter, one of them after a human approval (so a
dry-run diff with the request's headers is attached). Afterwards the test greps what Ratchet
stored -- every row of every runtime table (checkpoints, trace events, receipts, attachments'
rows), the attachment bytes, and on SQLite the database file itself -- for the bearer token,
the customer's e-mail (a secret input), the payment tokens the service minted (a redacted
response field) and the redaction key. None is there; their keyed digests are.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from django.apps import apps
from django.db import connection

from runtime.decisions.approvals import approval_grant
from runtime.engine import run_advance, run_start
from runtime.evidence.attachments import attachment_get
from runtime.models import Attachment
from tests.adapters.http.support import CUSTOMER_EMAIL, OrdersService
from tests.engine.http.support import order_steps, run_keys, write_orders_task
from tests.engine.support import restore


def _payment_tokens(orders: OrdersService) -> list[str]:
    with sqlite3.connect(orders.db) as conn:
        responses = [json.loads(r[0]) for r in conn.execute("SELECT response FROM idempotency")]
    return [r["body"]["payment_token"] for r in responses]


def _stored_rows() -> bytes:
    """Every row of every runtime table, as text."""
    out = []
    for model in apps.get_app_config("runtime").get_models():
        out += [repr(row) for row in model.objects.values_list()]
    return "\n".join(out).encode()


def _stored_files() -> bytes:
    """On SQLite, the database file and its WAL byte for byte (nothing on PostgreSQL)."""
    name = connection.settings_dict["NAME"]
    if connection.vendor != "sqlite" or not Path(name).is_file():
        return b""
    return b"".join(Path(f"{name}{s}").read_bytes() for s in ("", "-wal") if Path(f"{name}{s}").is_file())


@pytest.mark.django_db(transaction=True)
def test_it_stores_no_token_or_secret_value(tmp_path: Path, orders: OrdersService, secrets_in_env: None) -> None:
    steps = order_steps(3)
    steps[1]["risk"] = "high"
    run_id = run_start(spec_path=write_orders_task(tmp_path, orders, steps=steps, approval_risks=("high",)))
    assert run_advance(run_id=run_id).phase == "awaiting_approval"
    pending = restore(run_id).state.pending
    assert pending is not None
    approval_grant(run_id=run_id, approver="reviewer@example.org",
                   environment_fingerprint=pending.pre_state.state_fingerprint)
    assert run_advance(run_id=run_id).phase == "completed"
    assert orders.orders_per_key() == dict.fromkeys(run_keys(run_id, 3), 1)

    rows = _stored_rows()
    blobs = b"\n".join(attachment_get(digest=a.digest) for a in Attachment.objects.all())
    files = _stored_files()
    stored = rows + blobs + files
    secrets = [orders.token, CUSTOMER_EMAIL, *_payment_tokens(orders),
               orders.env["RATCHET_REDACTION_KEY"].partition(":")[2]]
    assert len(secrets) == 6
    for secret in secrets:
        assert secret.encode() not in stored, "a secret value reached the Ratchet database"
    # The checks above read the right bytes: the run, its keys and the redacted digests are there.
    assert run_id.encode() in rows and run_keys(run_id, 1)[0].encode() in rows
    assert connection.vendor != "sqlite" or run_id.encode() in files
    assert b"redacted:hmac-sha256:test-redact:" in rows
    assert b"Authorization: redacted:hmac-sha256:" in blobs  # the approver's dry-run diff
