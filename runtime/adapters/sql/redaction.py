"""Which SQL columns are redacted, table by table (DESIGN.md section 5.9).

The keyed digest itself is the shared :class:`runtime.adapters.redaction.Redactor`
(``redacted:hmac-sha256:<kid>:<hex>``, equal values give equal digests). What this module adds is
the SQL adapter's column names: ``"table.column"`` hides a column of one table, ``"column"``
that column in every table, in every row the adapter reports (observation listings and
fingerprints, ``RETURNING`` rows in receipts, dry-run diffs). Imports nothing from Django.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from runtime.adapters.redaction import Redactor, redaction_key_load


class ColumnRedactor:
    """Replaces configured columns of result rows by the shared keyed digest.

    Args:
        columns: ``"table.column"`` or ``"column"`` names.
        redactor: the shared redactor (holds the key); None only when ``columns`` is empty.

    Raises:
        ValueError: columns are configured without a redactor (a programming error).
    """

    def __init__(self, columns: Iterable[str], *, redactor: Redactor | None) -> None:
        columns = list(columns)
        self._qualified = {c for c in columns if "." in c}
        self._anywhere = {c for c in columns if "." not in c}
        if columns and redactor is None:
            raise ValueError("redacted columns need a redactor")
        self._redactor = redactor

    def hides(self, table: str, column: str) -> bool:
        """Whether ``table.column`` is redacted."""
        return column in self._anywhere or f"{table}.{column}" in self._qualified

    def value(self, value: Any) -> Any:
        """The keyed digest of one value (the value itself when nothing is configured)."""
        return self._redactor.value_digest(value) if self._redactor is not None else value

    def row(self, table: str, row: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``row`` with every redacted column replaced by its keyed digest."""
        if self._redactor is None:
            return dict(row)
        digest = self._redactor.value_digest
        return {col: (digest(val) if self.hides(table, col) else val) for col, val in row.items()}


def column_redactor(columns: Iterable[str]) -> ColumnRedactor:
    """A :class:`ColumnRedactor` with the runtime's redaction key (loaded only when needed).

    Raises:
        RedactionKeyError: columns are configured and the key is missing or malformed.
    """
    columns = list(columns)
    if not columns:
        return ColumnRedactor([], redactor=None)
    return ColumnRedactor(columns, redactor=Redactor.build(key=redaction_key_load()))
