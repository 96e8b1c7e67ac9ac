"""Deterministic idempotency keys and receipt comparison (DESIGN.md section 5).

Keys are derived *before* the write from values that survive a crash -- the run id, the plan
cursor and the replan epoch -- so a retry after any crash uses the same key (never random, never
new per retry). A reviewer's ``replan`` bumps the epoch, which yields a fresh key for the same
cursor while the old key stays quarantined.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.core.canonical import canonical_json, sha256_hex
from runtime.core.checkpoint import Receipt

KEY_PREFIX = "rk1_"


def derive_key(*, run_id: str, cursor: int, replan_epoch: int) -> str:
    """Idempotency key for the write at ``cursor`` of ``run_id`` in ``replan_epoch``.

    Args:
        run_id: the run's id (1-64 chars).
        cursor: index of the write in the plan, >= 0.
        replan_epoch: number of reviewer replans so far, >= 0.

    Returns:
        ``"rk1_" + 40 hex chars``; the same inputs give the same key in any process.

    Raises:
        ValueError: negative cursor or epoch, or an empty run id.
    """
    if not run_id or cursor < 0 or replan_epoch < 0:
        raise ValueError("derive_key needs a run id and non-negative cursor and epoch")
    material = canonical_json({"run_id": run_id, "cursor": cursor, "epoch": replan_epoch})
    return KEY_PREFIX + sha256_hex(b"ratchet-idempotency-key\x00" + material)[:40]


RECEIPT_IDENTITY_FIELDS = (
    "namespace",
    "adapter_version",
    "receipt_id",
    "idempotency_key",
    "intent_digest",
    "result",
    "environment_version_after",
)


@dataclass(frozen=True)
class ReceiptComparison:
    """Outcome of comparing a cached receipt with the adapter's authoritative one."""

    drifted_fields: tuple[str, ...]

    @property
    def same(self) -> bool:
        return not self.drifted_fields


def compare_receipts(cached: Receipt, authoritative: Receipt) -> ReceiptComparison:
    """Field-by-field comparison; any drift in namespace, version, receipt id, digest or result counts.

    The adapter's receipt is authoritative; the runtime's cached copy may only *confirm* it
    (DESIGN.md section 5: never claim a replay when they differ).
    """
    a = cached.model_dump(mode="json")
    b = authoritative.model_dump(mode="json")
    drift = tuple(name for name in a if a[name] != b.get(name))
    return ReceiptComparison(drifted_fields=drift)
