"""The orders service's SQLite store: idempotency records, orders, fences, a ledger (DESIGN.md section 5.8).

The store implements the IETF httpapi ``Idempotency-Key`` draft's server side in two
transactions, as a real payment API does:

1. :meth:`OrdersStore.claim` (``BEGIN IMMEDIATE``): check the fencing token against the newest
   seen for the account, then bind the key to the request fingerprint as ``processing`` with a
   short claim lease -- or answer replay (complete, same payload), mismatch (other payload: 422)
   or in flight (409). A claim whose process died is taken over once its lease has passed.
2. :meth:`OrdersStore.complete` (``BEGIN IMMEDIATE``): insert the order, advance the account's
   ledger and store the response under the key, all in one transaction, so an order exists if
   and only if its key's record is complete: one order per key whatever crashes where.

Only sha256 digests of credentials are stored. Imports nothing from Django.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runtime.adapters.http.contract import LEDGER_ROOT, ledger_next

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS credentials (token_sha256 TEXT PRIMARY KEY, label TEXT NOT NULL,
    expires_at REAL);
CREATE TABLE IF NOT EXISTS fences (account TEXT PRIMARY KEY, token INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ledger (account TEXT PRIMARY KEY, version INTEGER NOT NULL, head TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS idempotency (
    id INTEGER PRIMARY KEY AUTOINCREMENT, account TEXT NOT NULL, key TEXT NOT NULL,
    method TEXT NOT NULL, path TEXT NOT NULL, request_fingerprint TEXT NOT NULL,
    intent_digest TEXT, approval_digest TEXT, fencing_token INTEGER,
    status TEXT NOT NULL CHECK (status IN ('processing', 'complete')), locked_until REAL NOT NULL,
    response TEXT, ledger_version INTEGER, committed_at TEXT, UNIQUE (account, key));
CREATE TABLE IF NOT EXISTS orders (
    id INTEGER PRIMARY KEY AUTOINCREMENT, account TEXT NOT NULL, idempotency_key TEXT NOT NULL,
    sku TEXT NOT NULL, quantity INTEGER NOT NULL, customer TEXT NOT NULL, created_at TEXT NOT NULL);
-- No unique index on orders.idempotency_key on purpose: one order per key is the claim/complete
-- protocol's doing, and the crash tests count orders per key to prove it.
"""


@dataclass(frozen=True)
class Claim:
    """What :meth:`OrdersStore.claim` decided: ``outcome`` is ``claimed``, ``replay``, ``mismatch``,
    ``in_flight`` or ``stale_fence``; ``record`` is the stored record for replay and mismatch."""

    outcome: str
    record: dict[str, Any] | None = None
    newest_token: int | None = None


def token_digest(token: str) -> str:
    """How a credential is stored: hex sha256 of the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class OrdersStore:
    """The service's SQLite database (WAL); one connection per call, so threads never share one.

    Args:
        path: the database file (created with its schema and an instance id on first use).
        claim_seconds: how long a ``processing`` claim holds before another request may take it over.
    """

    def __init__(self, path: Path, *, claim_seconds: float = 30.0) -> None:
        self.path = Path(path)
        self.claim_seconds = claim_seconds
        with self._connect() as conn:
            conn.executescript(SCHEMA)
            conn.execute("INSERT OR IGNORE INTO meta (name, value) VALUES ('instance_id', ?)",
                         (f"orders-{uuid.uuid4().hex}",))

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def instance_id(self) -> str:
        """The store's identity, fixed when the database was created."""
        with self._connect() as conn:
            return conn.execute("SELECT value FROM meta WHERE name = 'instance_id'").fetchone()[0]

    def credential_add(self, *, token: str, label: str, expires_at: float | None = None) -> None:
        """Accept ``token`` (stored as its sha256) until ``expires_at`` (epoch seconds, None: never);
        a token already known keeps its expiry, so a restart never revives an expired one."""
        with self._connect() as conn:
            conn.execute("INSERT OR IGNORE INTO credentials VALUES (?, ?, ?)", (token_digest(token), label, expires_at))

    def credential_valid(self, token: str, *, now: float) -> bool:
        """Whether ``token`` is known and not expired at ``now`` (epoch seconds)."""
        with self._connect() as conn:
            row = conn.execute("SELECT expires_at FROM credentials WHERE token_sha256 = ?",
                               (token_digest(token),)).fetchone()
        return row is not None and (row["expires_at"] is None or row["expires_at"] > now)

    def claim(self, *, account: str, key: str, method: str, path: str, fingerprint: str, intent: str | None,
              approval: str | None, token: int | None, now: float) -> Claim:
        """Step 1 of a write (see the module docstring); one ``BEGIN IMMEDIATE`` transaction."""
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            if token is not None:
                row = conn.execute("SELECT token FROM fences WHERE account = ?", (account,)).fetchone()
                newest = row["token"] if row else 0
                if token < newest:
                    conn.execute("ROLLBACK")
                    return Claim("stale_fence", newest_token=newest)
                conn.execute("INSERT INTO fences VALUES (?, ?) ON CONFLICT (account) DO UPDATE SET token = "
                             "max(token, excluded.token)", (account, token))
            row = conn.execute("SELECT * FROM idempotency WHERE account = ? AND key = ?", (account, key)).fetchone()
            if row is not None:
                record = _record(row)
                if row["request_fingerprint"] != fingerprint or row["method"] != method or row["path"] != path:
                    outcome = "mismatch"
                elif row["status"] == "complete":
                    outcome = "replay"
                elif row["locked_until"] > now:
                    outcome = "in_flight"
                else:  # the claiming process died; same payload, so this request takes the claim over
                    conn.execute("UPDATE idempotency SET locked_until = ?, fencing_token = ? WHERE id = ?",
                                 (now + self.claim_seconds, token, row["id"]))
                    conn.execute("COMMIT")
                    return Claim("claimed")
                conn.execute("COMMIT")
                return Claim(outcome, record=record)
            conn.execute(
                "INSERT INTO idempotency (account, key, method, path, request_fingerprint, intent_digest, "
                "approval_digest, fencing_token, status, locked_until) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'processing', ?)",
                (account, key, method, path, fingerprint, intent, approval, token, now + self.claim_seconds))
            conn.execute("COMMIT")
            return Claim("claimed")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()

    def complete(self, *, account: str, key: str, order: dict[str, Any], payment_token: str,
                 now: datetime) -> dict[str, Any]:
        """Step 2: insert the order, advance the ledger, store the response; one transaction.

        Returns the complete record. Raises ``LookupError`` when the key holds no claim.
        """
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT * FROM idempotency WHERE account = ? AND key = ?", (account, key)).fetchone()
            if row is None:
                raise LookupError("no claim for this key")
            if row["status"] == "complete":
                conn.execute("COMMIT")
                return _record(row)
            stamp = now.astimezone(UTC).isoformat()
            cursor = conn.execute(
                "INSERT INTO orders (account, idempotency_key, sku, quantity, customer, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (account, key, order["sku"], order["quantity"], json.dumps(order["customer"], sort_keys=True), stamp))
            order_id = f"ord_{cursor.lastrowid}"
            ledger = conn.execute("SELECT version, head FROM ledger WHERE account = ?", (account,)).fetchone()
            version, head = (ledger["version"], ledger["head"]) if ledger else (0, LEDGER_ROOT)
            version, head = version + 1, ledger_next(head, row["request_fingerprint"])
            conn.execute("INSERT INTO ledger VALUES (?, ?, ?) ON CONFLICT (account) DO UPDATE SET "
                         "version = excluded.version, head = excluded.head", (account, version, head))
            location = f"/v1/accounts/{account}/orders/{order_id}"
            response = {"status": 201, "location": location,
                        "body": {"order_id": order_id, "sku": order["sku"], "quantity": order["quantity"],
                                 "customer": order["customer"], "payment_token": payment_token}}
            conn.execute("UPDATE idempotency SET status = 'complete', response = ?, ledger_version = ?, "
                         "committed_at = ? WHERE id = ?", (json.dumps(response), version, stamp, row["id"]))
            record = _record(conn.execute("SELECT * FROM idempotency WHERE id = ?", (row["id"],)).fetchone())
            conn.execute("COMMIT")
            return record
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()

    def lookup(self, *, account: str, key: str) -> dict[str, Any] | None:
        """The stored record for ``key`` (processing or complete), or None."""
        with self._connect() as conn:
            row = conn.execute("SELECT * FROM idempotency WHERE account = ? AND key = ?", (account, key)).fetchone()
        return _record(row) if row else None

    def records(self, *, account: str) -> list[dict[str, Any]]:
        """Every record of ``account``, in the order the keys were first used."""
        with self._connect() as conn:
            rows = conn.execute("SELECT * FROM idempotency WHERE account = ? ORDER BY id", (account,)).fetchall()
        return [_record(r) for r in rows]

    def state(self, *, account: str) -> dict[str, Any]:
        """``{"instance_id", "ledger_version", "ledger_head"}`` of ``account``."""
        with self._connect() as conn:
            row = conn.execute("SELECT version, head FROM ledger WHERE account = ?", (account,)).fetchone()
        version, head = (row["version"], row["head"]) if row else (0, LEDGER_ROOT)
        return {"instance_id": self.instance_id(), "ledger_version": version, "ledger_head": head}

    def orders_per_key(self, *, account: str) -> dict[str, int]:
        """``idempotency key -> number of orders`` (the exactly-once count tests read)."""
        with self._connect() as conn:
            rows = conn.execute("SELECT idempotency_key, count(*) AS n FROM orders WHERE account = ? "
                                "GROUP BY idempotency_key", (account,)).fetchall()
        return {r["idempotency_key"]: r["n"] for r in rows}


def _record(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "receipt_id": f"idem-{row['id']}", "key": row["key"], "status": row["status"], "method": row["method"],
        "path": row["path"], "request_fingerprint": row["request_fingerprint"], "intent_digest": row["intent_digest"],
        "approval_digest": row["approval_digest"], "fencing_token": row["fencing_token"],
        "response": json.loads(row["response"]) if row["response"] else None,
        "ledger_version": row["ledger_version"], "committed_at": row["committed_at"],
        "locked_until": row["locked_until"],
    }
