"""The rows the templates touch: read, redacted, fingerprinted, listed and diffed.

DESIGN.md sections 5.11 and 5.9. An observation of a SQL target is the content of every table
some template names: each row becomes canonical JSON with redacted columns replaced by their
keyed digest, rows are sorted, and the environment fingerprint is the typed digest of that
listing. An out-of-band ``UPDATE`` changes the fingerprint but not the adapter's version counter,
exactly as an out-of-band file edit does for the workspace adapter. Imports nothing from Django.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import difflib
import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, text

from runtime.adapters.sql.redaction import ColumnRedactor
from runtime.core.canonical import DigestKind, canonical_json, digest

MAX_LISTING_BYTES = 64 * 1024
"""Cut-off of the ``rows.jsonl`` observation attachment (the fingerprint covers every row)."""

Rows = dict[str, list[str]]
"""``table -> sorted canonical JSON lines``, one per row, redacted."""


def json_value(value: Any) -> Any:
    """A database value as JSON: numbers, text, booleans and NULL as they are; decimals and
    times as text; bytes as ``"base64:..."``."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return "base64:" + base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


def row_json(table: str, mapping: Any, *, redactor: ColumnRedactor, ignore: Iterable[str] = ()) -> dict[str, Any]:
    """One result row (a SQLAlchemy ``RowMapping``) as a redacted JSON object."""
    skipped = set(ignore)
    plain = {str(col): json_value(val) for col, val in mapping.items()
             if str(col) not in skipped and f"{table}.{col}" not in skipped}
    return redactor.row(table, plain)


def rows_read_txn(conn: Connection, tables: Iterable[str], *, redactor: ColumnRedactor,
                  ignore: Iterable[str] = ()) -> Rows:
    """Every row of ``tables`` as sorted canonical JSON lines, redacted (inside the caller's
    transaction, so a prediction sees its own uncommitted write)."""
    preparer = conn.dialect.identifier_preparer
    ignore = list(ignore)
    out: Rows = {}
    for table in tables:
        result = conn.execute(text(f"SELECT * FROM {preparer.quote(table)}"))
        lines = [canonical_json(row_json(table, m, redactor=redactor, ignore=ignore)).decode("utf-8")
                 for m in result.mappings()]
        out[table] = sorted(lines)
    return out


def rows_fingerprint(rows: Rows) -> str:
    """The environment fingerprint: typed digest over every table's sorted rows."""
    return digest(DigestKind.ENVIRONMENT, {"sql_rows": rows})


def rows_listing(rows: Rows) -> bytes:
    """``rows.jsonl``: ``<table>\\t<row JSON>`` lines, cut at :data:`MAX_LISTING_BYTES`."""
    text_out = "".join(f"{table}\t{line}\n" for table, lines in sorted(rows.items()) for line in lines)
    data = text_out.encode("utf-8")
    if len(data) > MAX_LISTING_BYTES:
        data = data[:MAX_LISTING_BYTES].rsplit(b"\n", 1)[0] + b"\n... (cut; the fingerprint covers every row)\n"
    return data


def rows_diff(before: Rows, after: Rows) -> str:
    """Unified diff of each table's rows before and after one statement (redacted)."""
    chunks: list[str] = []
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, []), after.get(table, [])
        if old == new:
            continue
        chunks.extend(difflib.unified_diff([line + "\n" for line in old], [line + "\n" for line in new],
                                           fromfile=f"a/{table}", tofile=f"b/{table}", n=1))
    return "".join(chunks)
