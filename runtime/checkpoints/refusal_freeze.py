"""A restore that fails closed reaches a person once (DESIGN.md section 4.15).

A restore refuses a run when its evidence does not hold: a MAC or signature that does not verify,
a truncated or missing checkpoint row, a mark that disagrees, a restored backup, a tenant or
scenario mismatch, a derived row that disagrees with the signed checkpoint. Nothing can be
committed then (the state a commit would extend is not trustworthy), so the freeze is written to
the rows alone, as the ledger's is (``runtime.checkpoints.ledger.ledger_failure_freeze``): one
review case row holding the typed error, and a live run row moved to ``needs_review`` with the
stop reason ``restore_refused``, which the sweeper and the workers leave alone and which agrees
with any signed state (``runtime.core.derived_rows.ROW_ONLY_FREEZES``). The refusal is then traced
as the run's newest event (``recovery.failed`` when a worker was recovering the run,
``restore.refused`` otherwise), with the case id.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, transaction
from django.db.models.functions import Now

from runtime.core.canonical import canonical_json, sha256_hex
from runtime.core.checkpoint import Phase, StopReason
from runtime.errors import LedgerChainError, MarkStoreUnavailableError, RatchetError
from runtime.evidence.trace import trace_append
from runtime.models import ReviewCase, Run, TraceEvent

logger = logging.getLogger(__name__)

RESTORE_REFUSED = "restore.refused"
"""The event a restore that fails closed outside a recovery is traced as."""

RECOVERY_FAILED = "recovery.failed"
"""The event a restore that fails closed during a recovery is traced as."""

_LIVE = (Phase.RUNNING.value, Phase.PENDING.value)
_EXCERPT_EVENTS = 20


def restore_refusal_case_id(*, run_id: str, generation: int) -> str:
    """The one case id of a refused restore of ``run_id`` while its row says ``generation``."""
    return "case_" + sha256_hex(canonical_json({"run_id": run_id, "restore_refused": generation}))[:32]


def restore_refusal_freeze(*, run_id: str, error: RatchetError, worker: str, recovering: bool,
                           extra: dict[str, object] | None = None) -> str | None:
    """Freeze ``run_id`` for a person after its restore failed closed with ``error``; trace it.

    Args:
        run_id: the run whose restore raised.
        error: the typed error (a ``CheckpointError`` or ``SigningError``); its class name and
            its first 500 characters are kept (messages carry no key material).
        worker: who restored (kept in the trace payload).
        recovering: whether the restore was part of a recovery (traced ``recovery.failed``).
        extra: more trace payload (durations).

    Returns:
        The review case id, or None when no case was opened here: the run row is gone, or the
        ledger's own freeze already opened one (``LedgerChainError``).

    A mark store that does not answer (``MarkStoreUnavailableError``) is an outage, not evidence:
    nothing is opened, frozen or traced, so the sweeper keeps offering the run and it resumes once
    the store is back (DESIGN.md section 8.8).

    Never raises for a database that cannot take the rows or the event: the refusal itself still
    reaches the caller, which re-raises it; the miss is logged.
    """
    if isinstance(error, MarkStoreUnavailableError):
        return None
    case_id: str | None = None
    try:
        case_id = _freeze(run_id=run_id, error=error)
    except DatabaseError as exc:
        logger.warning("run %s: the refused restore's case not opened: %s", run_id, type(exc).__name__)
    payload = {"error": type(error).__name__, "message": str(error)[:500], "worker": worker,
               "case_id": case_id, "stop_reason": StopReason.RESTORE_REFUSED.value, **(extra or {})}
    try:
        trace_append(run_id=run_id, event_type=RECOVERY_FAILED if recovering else RESTORE_REFUSED,
                     payload=payload)
    except (RatchetError, DatabaseError) as exc:  # never hide the refusal itself
        logger.warning("run %s: the refused restore not traced: %s", run_id, type(exc).__name__)
    return case_id


def code_change_case_open(*, run_id: str, error: RatchetError) -> str | None:
    """Open (once per run generation) a review case for a resume refused under changed code.

    The run is not frozen: a worker that has the pinned code may still take it (DESIGN.md
    section 5.14); the case tells a person that some worker runs other code than the run was
    pinned to, which is how a changed risk rule would otherwise go unnoticed (DESIGN.md section 8.4).

    Args:
        run_id: the run.
        error: the ``CodeDigestMismatchError`` (or its closure subclass) the resume raised.

    Returns:
        The case id, or None when the run row is gone or the database refused the row (logged).
    """
    try:
        run = Run.objects.filter(run_id=run_id).values("generation", "phase").first()
        if run is None:
            return None
        case_id = "case_" + sha256_hex(canonical_json({"run_id": run_id, "code_changed": run["generation"]}))[:32]
        _case_open(case_id=case_id, run_id=run_id, reason=StopReason.CODE_CHANGED, error=error, run=run)
        return case_id
    except DatabaseError as exc:
        logger.warning("run %s: the changed-code case not opened: %s", run_id, type(exc).__name__)
        return None


def _freeze(*, run_id: str, error: RatchetError) -> str | None:
    if isinstance(error, LedgerChainError):
        return None  # the ledger's freeze opened its case inside the restore
    run = Run.objects.filter(run_id=run_id).values("generation", "phase").first()
    if run is None:
        return None
    case_id = restore_refusal_case_id(run_id=run_id, generation=run["generation"])
    with transaction.atomic():
        _case_open(case_id=case_id, run_id=run_id, reason=StopReason.RESTORE_REFUSED, error=error, run=run)
        # Only a live row is moved: a row that already says frozen or finished is left as it
        # is, so the disagreement an edit made stays visible to checkpoint verify and bundles.
        Run.objects.filter(run_id=run_id, phase__in=_LIVE).update(
            phase=Phase.NEEDS_REVIEW.value, stop_reason=StopReason.RESTORE_REFUSED.value, updated_at=Now())
    return case_id


def _case_open(*, case_id: str, run_id: str, reason: StopReason, error: RatchetError,
               run: dict[str, object]) -> None:
    excerpt = [
        {"seq": seq, "type": event_type, "hash": digest}
        for seq, event_type, digest in TraceEvent.objects.filter(run_id=run_id)
        .order_by("-seq").values_list("seq", "event_type", "hash")[:_EXCERPT_EVENTS]
    ][::-1]
    _, created = ReviewCase.objects.get_or_create(case_id=case_id, defaults={
        "run_id": run_id,
        "reason": reason.value,
        "detail": f"{type(error).__name__}: {error}"[:4000],
        "environment": {},
        "observed": {"error": type(error).__name__, "row_phase": run["phase"],
                     "row_generation": run["generation"]},
        "trace_excerpt": excerpt,
    })
    if created:
        logger.error("run %s: %s (%s); case %s opened", run_id, reason.value, type(error).__name__, case_id)
