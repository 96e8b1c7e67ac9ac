"""Receipts read back from an adapter's own store (DESIGN.md section 5).

Both adapters keep receipts as canonical JSON (a journal line, a commit trailer body) and parse
them with the same strictness, so the receipt a call returns and the one a later lookup reads are
equal field for field. Imports nothing from Django.
"""

from __future__ import annotations

from pydantic import ValidationError

from runtime.core.checkpoint import Receipt
from runtime.errors import AdapterStoreCorruptError


def receipt_from_json(raw: bytes | str, *, where: str) -> Receipt:
    """Parse a stored receipt strictly (JSON mode, so timestamps round-trip).

    Raises:
        AdapterStoreCorruptError: the stored receipt does not validate.
    """
    try:
        return Receipt.model_validate_json(raw)
    except ValidationError as exc:
        raise AdapterStoreCorruptError(
            f"stored receipt does not validate: {exc.error_count()} errors", where=where
        ) from None
