"""The receipts ledger's rows: indexed reads, appends inside the commit transaction, verification
and the freeze when a ledger does not verify (DESIGN.md section 3.1).

Chain hashing and the engine's view are framework-free (``runtime.core.ledger``); this module
stores and reads the ``LedgerEntry`` rows.

Verification is incremental per process: :data:`_VERIFIED` remembers, per run, a head this
process verified (or wrote itself). Restore then checks only that the remembered last entry still
carries its hash and chains the entries after it; a fresh process verifies the whole chain once.
The cache is only a hint: whenever it does not fit what is stored, the whole chain is verified,
so it can make restore faster but never make a broken ledger pass. ``checkpoint verify`` and the
evidence bundle always verify the whole chain (``full=True``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import router, transaction
from django.db.models import QuerySet
from django.db.models.functions import Now

from runtime.checkpoints.cases import review_case_id
from runtime.core.checkpoint import LedgerHead, Phase, StopReason
from runtime.core.ledger import LedgerEntry, LedgerKind, ledger_chain_check
from runtime.database.statements import compiled_delete, compiled_insert, compiled_rows
from runtime.errors import LedgerChainError
from runtime.models import LedgerEntry as LedgerRow
from runtime.models import ReviewCase, Run

logger = logging.getLogger("runtime.checkpoints.ledger")

_VERIFIED: dict[str, LedgerHead] = {}
"""run id -> a head this process verified or committed (a hint; see the module docstring)."""


def _entry(row: tuple[int, str, str, str, str, str]) -> LedgerEntry:
    seq, kind, key, body, prev_hash, entry_hash = row
    return LedgerEntry(seq=seq, kind=LedgerKind(kind), key=key, body=body.encode("utf-8"),
                       prev_hash=prev_hash, entry_hash=entry_hash)


_COLUMNS = ("seq", "kind", "key", "body", "prev_hash", "entry_hash")


class LedgerRows:
    """:class:`runtime.core.ledger.LedgerReader` over one run's rows (indexed by
    ``(run, kind, key)`` and ``(run, seq)``)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def lookup(self, kind: LedgerKind, key: str, *, upto: int) -> bytes | None:
        """Body bytes of entry ``(kind, key)`` among entries ``1..upto``, or None."""
        # Compiled once per process: nonce lookups; idempotency keys go through lookup_kinds.
        rows = compiled_rows(
            alias=router.db_for_read(LedgerRow), shape=("ledger_lookup",),
            build=lambda s: (LedgerRow.objects.filter(run_id=s["run_id"], kind=s["kind"], key=s["key"],
                                                      seq__lte=s["upto"])
                             .order_by("seq").values_list("body")[:1]),
            slots={"run_id": self.run_id, "kind": kind.value, "key": key, "upto": upto})
        return rows[0][0].encode("utf-8") if rows else None

    def lookup_kinds(self, kinds: tuple[LedgerKind, ...], key: str, *, upto: int) -> dict[LedgerKind, bytes]:
        """Bodies of entries ``(kind, key)`` for each of ``kinds`` among entries ``1..upto``, by
        kind (a kind with none is left out); ``kinds`` are constants of the caller (at most one
        entry per kind and key: the ``(run, kind, key)`` constraint)."""
        # Compiled once per process and set of kinds: the step loop asks it once per proposed key.
        values = [kind.value for kind in kinds]
        rows = compiled_rows(
            alias=router.db_for_read(LedgerRow), shape=("ledger_lookup_kinds", *values),
            build=lambda s: (LedgerRow.objects.filter(run_id=s["run_id"], kind__in=values, key=s["key"],
                                                      seq__lte=s["upto"])
                             .values_list("kind", "body")),
            slots={"run_id": self.run_id, "key": key, "upto": upto})
        return {LedgerKind(kind): body.encode("utf-8") for kind, body in rows}

    def entries(self, *, upto: int, kind: LedgerKind | None = None) -> list[LedgerEntry]:
        """Entries ``1..upto`` (of ``kind`` if given) in ``seq`` order."""
        rows = LedgerRow.objects.filter(run_id=self.run_id, seq__lte=upto)
        if kind is not None:
            rows = rows.filter(kind=kind.value)
        return [_entry(r) for r in rows.order_by("seq").values_list(*_COLUMNS)]


def ledger_rows_add(*, run_id: str, entries: Sequence[LedgerEntry], generation: int) -> None:
    """Insert ``entries`` in the caller's transaction, one multi-row INSERT (DESIGN.md section 4).

    Raises:
        IntegrityError: an entry's ``seq`` or ``(kind, key)`` is already stored (the caller's
            transaction rolls back; the fence makes this impossible for a current lease holder).
    """
    if entries:
        # Compiled once per row count (runtime.database.statements): the commit's hot path.
        compiled_insert(alias=router.db_for_write(LedgerRow), objs=[
            LedgerRow(run_id=run_id, seq=e.seq, kind=e.kind.value, key=e.key,
                      body=e.body.decode("utf-8"), prev_hash=e.prev_hash, entry_hash=e.entry_hash,
                      generation=generation)
            for e in entries
        ])


def ledger_orphans_drop(*, run_id: str, committed_length: int) -> int:
    """Delete entries beyond ``committed_length`` (split HWM database only, DESIGN.md section 4.3).

    There, entries are committed before the HWM names the checkpoint that covers them, so a crash
    can leave entries no committed checkpoint covers. They are not part of the ledger (the
    signed head is the ledger's end) and would collide with the next commit's ``seq``. Only a
    caller holding the fenced run row lock may call this, so nothing committed can be beyond.
    """
    # Every split-HWM commit runs it: compiled once (runtime.database.statements). Nothing
    # references ledger rows or listens to their deletion, so the DELETE is the whole of it.
    return compiled_delete(
        alias=router.db_for_write(LedgerRow), shape=("ledger_orphans",),
        build=lambda s: LedgerRow.objects.filter(run_id=s["run_id"], seq__gt=s["length"]),
        slots={"run_id": run_id, "length": committed_length})


def ledger_committed(*, run_id: str, head: LedgerHead) -> None:
    """Remember that this process wrote the ledger up to ``head`` (it need not re-verify it)."""
    _VERIFIED[run_id] = head


def ledger_verify(*, run_id: str, head: LedgerHead, full: bool = False) -> None:
    """Check the run's stored entries chain to exactly ``head`` (DESIGN.md section 3.1).

    Args:
        run_id: the run.
        head: the ``(length, head)`` the authentic committed checkpoint signs.
        full: verify every entry even if this process verified a prefix before.

    Raises:
        LedgerChainError: a dropped, reordered, edited, inserted or truncated entry; names the
            first bad ``seq``.
    """
    known = None if full else _VERIFIED.get(run_id)
    if known is not None and known.length <= head.length:
        try:
            _verify_from(run_id=run_id, start=known, head=head)
        except LedgerChainError:
            _verify_from(run_id=run_id, start=LedgerHead(), head=head)  # the hint did not fit
    else:
        _verify_from(run_id=run_id, start=LedgerHead(), head=head)
    _VERIFIED[run_id] = head


def _verify_from(*, run_id: str, start: LedgerHead, head: LedgerHead) -> None:
    rows = compiled_rows(alias=router.db_for_read(LedgerRow), shape=("ledger_verify",),
                         build=_verify_rows, slots={"run_id": run_id,
                                                    "first": max(start.length, 1),
                                                    "last": head.length})
    entries = [_entry(r) for r in rows]
    if start.length:
        if not entries or entries[0].seq != start.length or entries[0].entry_hash != start.head:
            raise LedgerChainError("the ledger no longer holds the entry this process verified",
                                   run_id=run_id, seq=start.length)
        entries = entries[1:]
    ledger_chain_check(run_id=run_id, start=start, rows=entries, expected=head)


def _verify_rows(s: Mapping[str, Any]) -> QuerySet[Any]:
    # Every restore runs it: compiled once per process (runtime.database.statements).
    return (LedgerRow.objects.filter(run_id=s["run_id"], seq__gte=s["first"], seq__lte=s["last"])
            .order_by("seq").values_list(*_COLUMNS))


def ledger_entries(*, run_id: str, head: LedgerHead) -> list[LedgerEntry]:
    """All entries the checkpoint at ``head`` covers, verified in full (for bundles and audits).

    Raises:
        LedgerChainError: as :func:`ledger_verify`.
    """
    entries = LedgerRows(run_id).entries(upto=head.length)
    ledger_chain_check(run_id=run_id, start=LedgerHead(), rows=entries, expected=head)
    return entries


def ledger_failure_freeze(*, run_id: str, error: LedgerChainError, generation: int) -> str:
    """Freeze the run for a human after its ledger failed to verify; return the case id.

    No checkpoint can be committed (the state it would extend is not trustworthy), so the run
    row's phase is set to ``needs_review`` (the sweeper and workers then leave it alone) and a
    review case row holds the finding. Idempotent: the case id is derived from the generation.
    """
    case_id = review_case_id(run_id=run_id, generation=-generation)
    with transaction.atomic():
        ReviewCase.objects.get_or_create(case_id=case_id, defaults={
            "run_id": run_id,
            "reason": StopReason.LEDGER_CORRUPT.value,
            "detail": f"{error.message} (checkpoint generation {generation})"[:4000],
            "environment": {},
            "trace_excerpt": [],
        })
        Run.objects.filter(run_id=run_id).update(phase=Phase.NEEDS_REVIEW.value,
                                                 stop_reason=StopReason.LEDGER_CORRUPT.value,
                                                 updated_at=Now())
    logger.error("run %s: receipts ledger does not verify; frozen with case %s: %s",
                 run_id, case_id, error)
    return case_id
