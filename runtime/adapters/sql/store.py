"""The SQL adapter's own tables in the target database: instance, fence and receipts.

DESIGN.md section 5.11. Three small tables live next to the business tables, so the business
write, its receipt and the fence check commit in ONE transaction of the target database:

* ``ratchet_sql_instance`` -- one row: the instance id (a copy of the database keeps it, a new
  database gets another) and the version counter, ``s<N>`` after N committed writes;
* ``ratchet_sql_fence`` -- one row: the newest fencing token accepted; advanced by
  compare-and-set (``UPDATE ... WHERE token <= :token``), so a stale writer changes no row;
* ``ratchet_sql_receipts`` -- one row per idempotency key (primary key): intent digest, fencing
  token, template, the full receipt as canonical JSON and ``committed_at``.

The tables are created once, when the instance row does not exist yet. Afterwards a missing
receipt or fence table is never re-created: "no receipt" could then no longer be told from
"receipts lost", so every call fails closed with :class:`SqlReceiptStoreMissingError`.

Functions named ``*_txn`` run inside the caller's transaction (STYLE.md rule 7). Imports nothing
from Django.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Connection, inspect, text

from runtime.adapters.receipt_json import receipt_from_json
from runtime.adapters.sql.options import ADAPTER_TABLES
from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import Receipt
from runtime.errors import AdapterStoreCorruptError, FencingTokenError, SqlReceiptStoreMissingError

RECEIPTS, FENCE, INSTANCE = ADAPTER_TABLES

_DDL = (
    f"CREATE TABLE {INSTANCE} (id INTEGER PRIMARY KEY, instance_id VARCHAR(64) NOT NULL, version BIGINT NOT NULL)",
    f"CREATE TABLE {FENCE} (id INTEGER PRIMARY KEY, token BIGINT NOT NULL)",
    f"CREATE TABLE {RECEIPTS} (idempotency_key VARCHAR(200) PRIMARY KEY, seq BIGINT NOT NULL UNIQUE, "
    "intent_digest VARCHAR(80) NOT NULL, fencing_token BIGINT NOT NULL, template VARCHAR(64) NOT NULL, "
    "receipt TEXT NOT NULL, committed_at VARCHAR(40) NOT NULL)",
)
# A fixed key for PostgreSQL's transaction-scoped advisory lock: two workers opening a fresh
# target at once must not both create the tables (the loser would fail on pg_type's index).
_INSTALL_LOCK_KEY = 0x5241_5443_5351_4C01


def store_install_txn(conn: Connection) -> None:
    """Create the adapter's tables on a target that has none of them; leave any other target alone.

    A target holding only part of the store is not repaired here: the calls that need the
    missing part raise :class:`SqlReceiptStoreMissingError` (inside the engine's step, so the run
    freezes for review with a case instead of failing to open).
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _INSTALL_LOCK_KEY})
    if set(inspect(conn).get_table_names()) & set(ADAPTER_TABLES):
        return
    for statement in _DDL:
        conn.execute(text(statement))
    conn.execute(text(f"INSERT INTO {INSTANCE} (id, instance_id, version) VALUES (1, :iid, 0)"),
                 {"iid": str(uuid.uuid4())})
    conn.execute(text(f"INSERT INTO {FENCE} (id, token) VALUES (1, 0)"))


def store_check_txn(conn: Connection) -> tuple[str, int]:
    """The instance id and version counter, after checking every adapter table is there.

    Raises:
        SqlReceiptStoreMissingError: a table (or the instance or fence row) is missing.
        AdapterStoreCorruptError: the receipt rows do not add up to the version counter (rows
            were deleted out of band: a lost receipt must not look like "never executed").
    """
    present = set(inspect(conn).get_table_names())
    missing = [name for name in ADAPTER_TABLES if name not in present]
    if missing:
        raise SqlReceiptStoreMissingError(missing=",".join(missing))
    # One statement, so one snapshot: under READ COMMITTED, separate reads of the counter and of
    # the receipt rows could straddle another writer's commit and see them disagree.
    row = conn.execute(text(
        f"SELECT i.instance_id, i.version, (SELECT COUNT(*) FROM {RECEIPTS}), "
        f"(SELECT COALESCE(MAX(seq), 0) FROM {RECEIPTS}) "
        f"FROM {INSTANCE} i JOIN {FENCE} f ON f.id = 1 WHERE i.id = 1")).first()
    if row is None:
        raise SqlReceiptStoreMissingError("the adapter's instance or fence row is missing")
    instance_id, version, count, top = str(row[0]), int(row[1]), int(row[2]), int(row[3])
    if count != version or top != version:
        raise AdapterStoreCorruptError("receipt rows do not match the adapter's version counter",
                                       instance_id=instance_id, version=version, receipt_rows=count)
    return instance_id, version


def instance_read_txn(conn: Connection) -> tuple[str, int]:
    """The instance id and version counter, reading only the instance row.

    Observing needs no receipt: a dropped receipt table is refused by every call that reads or
    writes receipts (and by predictions, so the next proposal freezes the run for review),
    while observing still tells the engine which state the environment is in.

    Raises:
        SqlReceiptStoreMissingError: the instance table or row is missing.
    """
    if INSTANCE not in set(inspect(conn).get_table_names()):
        raise SqlReceiptStoreMissingError(missing=INSTANCE)
    row = conn.execute(text(f"SELECT instance_id, version FROM {INSTANCE} WHERE id = 1")).first()
    if row is None:
        raise SqlReceiptStoreMissingError("the adapter's instance row is missing")
    return str(row[0]), int(row[1])


def fence_advance_txn(conn: Connection, token: int, *, instance_id: str, idempotency_key: str) -> None:
    """Compare-and-set the fence to ``token``; refuse a token older than the newest seen.

    The ``UPDATE`` also locks the fence row until the transaction ends, so two writers on one
    target are serialised here and the second one re-reads receipts after the first commits.

    Raises:
        FencingTokenError: ``token`` is below the stored one; the caller rolls back.
    """
    changed = conn.execute(text(f"UPDATE {FENCE} SET token = :t WHERE id = 1 AND token <= :t"), {"t": token})
    if changed.rowcount != 1:
        newest = conn.execute(text(f"SELECT token FROM {FENCE} WHERE id = 1")).scalar()
        raise FencingTokenError(instance_id=instance_id, idempotency_key=idempotency_key,
                                fencing_token=token, newest_seen=newest)


def fence_read_txn(conn: Connection) -> int:
    """The newest fencing token the target has accepted."""
    return int(conn.execute(text(f"SELECT token FROM {FENCE} WHERE id = 1")).scalar() or 0)


def _parse(row: Any, *, instance_id: str) -> Receipt:
    receipt = receipt_from_json(row.receipt, where=f"{RECEIPTS} of sql:{instance_id}")
    if (receipt.idempotency_key != row.idempotency_key or receipt.intent_digest != row.intent_digest
            or receipt.fencing_token != row.fencing_token):
        raise AdapterStoreCorruptError("a receipt row's columns disagree with its stored receipt",
                                       instance_id=instance_id, idempotency_key=row.idempotency_key)
    return receipt


def receipt_get_txn(conn: Connection, key: str, *, instance_id: str) -> Receipt | None:
    """The stored receipt for ``key``, or None.

    Raises:
        AdapterStoreCorruptError: the stored receipt does not parse or disagrees with its row.
    """
    row = conn.execute(text(f"SELECT idempotency_key, intent_digest, fencing_token, receipt FROM {RECEIPTS} "
                            "WHERE idempotency_key = :k"), {"k": key}).first()
    return None if row is None else _parse(row, instance_id=instance_id)


def receipts_all_txn(conn: Connection, *, instance_id: str) -> list[Receipt]:
    """Every stored receipt, oldest first (by the version it produced)."""
    rows = conn.execute(text(f"SELECT idempotency_key, intent_digest, fencing_token, receipt FROM {RECEIPTS} "
                             "ORDER BY seq")).all()
    return [_parse(row, instance_id=instance_id) for row in rows]


def version_bump_txn(conn: Connection) -> int:
    """Advance the version counter by one and return the new value."""
    conn.execute(text(f"UPDATE {INSTANCE} SET version = version + 1 WHERE id = 1"))
    return int(conn.execute(text(f"SELECT version FROM {INSTANCE} WHERE id = 1")).scalar_one())


def receipt_insert_txn(conn: Connection, receipt: Receipt, *, seq: int, template: str) -> None:
    """Store ``receipt`` as the row for its key (the primary key refuses a second one)."""
    conn.execute(text(f"INSERT INTO {RECEIPTS} (idempotency_key, seq, intent_digest, fencing_token, template, "
                      "receipt, committed_at) VALUES (:k, :seq, :intent, :token, :template, :receipt, :at)"), {
        "k": receipt.idempotency_key, "seq": seq, "intent": receipt.intent_digest, "token": receipt.fencing_token,
        "template": template, "receipt": canonical_json(receipt.model_dump(mode="json")).decode("utf-8"),
        "at": receipt.committed_at.isoformat() if receipt.committed_at else "",
    })
