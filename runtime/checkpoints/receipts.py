"""The runtime's idempotency cache: a rebuildable copy of adapter receipts (DESIGN.md section 5).

Keyed by ``(idempotency_key, intent_digest)``: the same key with the same intent returns the
original receipt; the same key with another intent is a conflict. The adapter's receipt stays the
authoritative evidence: the engine never trusts this cache alone (a cached receipt the adapter no
longer has, or one that drifted from it, freezes the run for review).

Quarantined keys (after a reviewer's ``replan``) can never be used again.
"""

from __future__ import annotations

from django.db import IntegrityError, router, transaction

from runtime.core.checkpoint import Receipt
from runtime.database.commit_writes import RowsInsert
from runtime.database.statements import compiled_rows
from runtime.errors import KeyQuarantinedError, ReceiptConflictError
from runtime.models import IdempotencyRecord


def receipt_cache_get(*, idempotency_key: str) -> Receipt | None:
    """The cached receipt for ``idempotency_key`` or None.

    Raises:
        KeyQuarantinedError: the key was quarantined by a reviewer's replan.
    """
    # Compiled once per process: the step loop reads this on every write.
    rows = compiled_rows(
        alias=router.db_for_read(IdempotencyRecord), shape=("receipt_cache_get",),
        build=lambda s: (IdempotencyRecord.objects.filter(idempotency_key=s["key"]).order_by("pk")
                         .values_list("run_id", "quarantined", "receipt")[:1]),
        slots={"key": idempotency_key})
    if not rows:
        return None
    run_id, quarantined, receipt = rows[0]
    if quarantined:
        raise KeyQuarantinedError(idempotency_key=idempotency_key, run_id=run_id)
    if receipt is None:
        return None
    return Receipt.model_validate(receipt, strict=False)


def receipt_cache_write(*, run_id: str, receipt: Receipt) -> RowsInsert:
    """The receipt-cache row of ``receipt`` as a write a checkpoint commit runs in its own
    transaction (DESIGN.md section 4.3): a batched commit inserts it and, when a row for the key
    is already there, rolls back to the statement-by-statement path, where
    :func:`receipt_cache_put` decides (same receipt: kept; another: ``ReceiptConflictError``;
    quarantined: ``KeyQuarantinedError``)."""
    row = IdempotencyRecord(run_id=run_id, idempotency_key=receipt.idempotency_key,
                            intent_digest=receipt.intent_digest,
                            receipt=receipt.model_dump(mode="json"),
                            receipt_fingerprint=receipt.fingerprint())
    return RowsInsert(alias=router.db_for_write(IdempotencyRecord), objs=(row,), exclusive=True,
                      fallback=lambda: receipt_cache_put(run_id=run_id, receipt=receipt))


def receipt_cache_put(*, run_id: str, receipt: Receipt) -> Receipt:
    """Record ``receipt`` under its key; idempotent for the same (key, intent, fingerprint).

    Returns:
        The receipt now cached (the original one when the same key and intent already exist).

    Raises:
        ReceiptConflictError: the key is cached with a different intent digest or receipt.
        KeyQuarantinedError: the key is quarantined.
    """
    fingerprint = receipt.fingerprint()
    try:
        with transaction.atomic():
            IdempotencyRecord.objects.create(
                run_id=run_id,
                idempotency_key=receipt.idempotency_key,
                intent_digest=receipt.intent_digest,
                receipt=receipt.model_dump(mode="json"),
                receipt_fingerprint=fingerprint,
            )
            return receipt
    except IntegrityError:
        pass
    row = IdempotencyRecord.objects.get(idempotency_key=receipt.idempotency_key)
    if row.quarantined:
        raise KeyQuarantinedError(idempotency_key=receipt.idempotency_key, run_id=row.run_id)
    if row.intent_digest != receipt.intent_digest or row.receipt_fingerprint != fingerprint:
        raise ReceiptConflictError(
            idempotency_key=receipt.idempotency_key,
            cached_intent=row.intent_digest,
            offered_intent=receipt.intent_digest,
        )
    return Receipt.model_validate(row.receipt, strict=False)


def key_quarantine(*, run_id: str, idempotency_key: str, intent_digest: str, reason: str) -> None:
    """Mark ``idempotency_key`` as never usable again (a reviewer's replan, DESIGN.md section 6)."""
    updated = IdempotencyRecord.objects.filter(idempotency_key=idempotency_key).update(
        quarantined=True, quarantine_reason=reason[:500]
    )
    if updated == 0:
        IdempotencyRecord.objects.create(
            run_id=run_id, idempotency_key=idempotency_key, intent_digest=intent_digest,
            receipt=None, receipt_fingerprint="", quarantined=True, quarantine_reason=reason[:500],
        )
