"""Half-created runs: find and discard a run that died before its first checkpoint (DESIGN.md section 4).

Creating a run takes three committed steps (``runtime.checkpoints.protocol.run_create``): the ``Run`` row
with its lease, the high-water mark at generation 0, then checkpoint generation 1 whose HWM
compare-and-set is the commit point. A creator killed before that commit point leaves a run that
nothing can resume (restore finds no committed checkpoint) and that nobody was told about
(``manage.py run`` prints the run id only once the run exists). Such a run is *half-created*:

* ``state_version`` and the ``generation`` mirror are 0 (no commit ever passed the fence);
* its HWM row is missing or still at generation 0, and the HWM store answered (an unreadable
  store fails closed: the run might be committed);
* it holds no idempotency record, receipts-ledger entry or review case.

It may still hold trace events (``lease.acquired``) and *orphan* checkpoint rows, written before
the HWM CAS that never happened; they were never committed, so deleting them loses nothing.

Discarding is safe against a creator that is still alive: the creator's ``Run`` row and lease are
committed in one transaction, so a discard either finds no row or finds a lease. A live lease
(judged by the database clock) is refused with :class:`LeaseHeldError`; once it has expired the
creator can never commit generation 1, because the commit's fence requires an unexpired lease.
The checks and deletes run in one transaction holding the row lock (``SELECT ... FOR UPDATE``;
on SQLite the IMMEDIATE transaction serialises writers). With the HWM in its own database its
row is deleted after the default database commits: a crash in between leaves only an HWM row at
generation 0 for a run id that no longer exists, which nothing reads.

A prepared environment (``setup = "clone-at-base"``: a directory named by the run id that run
creation cloned) is removed too, after the database commit; a workspace the operator supplied
is never touched. What was removed is logged (logger ``runtime.workers.run_discard``) and returned.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.db import DEFAULT_DB_ALIAS, OperationalError, ProgrammingError, transaction
from django.db.models import ProtectedError, Q
from django.db.models.functions import Now

from runtime.database.routers import hwm_alias
from runtime.errors import (
    HighWaterMarkMissingError,
    LeaseHeldError,
    RunDiscardRefusedError,
    RunNotFoundError,
)
from runtime.models import (
    Checkpoint,
    HighWaterMark,
    IdempotencyRecord,
    LedgerEntry,
    ReviewCase,
    Run,
    TraceEvent,
)

logger = logging.getLogger("runtime.workers.run_discard")

_LIVE_LEASE = Q(lease_expires_at__gt=Now()) & ~Q(owner_worker="")


@dataclass(frozen=True)
class HalfCreatedRun:
    """A run that died before its first checkpoint, as ``manage.py runs --half-created`` lists it.

    Attributes:
        run_id, task_id: the run.
        created_at: when the run row was written (database clock).
        hwm: ``"missing"`` or ``"generation 0"``.
        orphan_checkpoints: checkpoint rows written but never committed.
        trace_events: trace events the run holds.
        lease_live: a worker (maybe the creator) still holds an unexpired lease: not discardable yet.
        owner_worker: the lease holder, or ``""``.
        target: the environment directory recorded for the run (``""`` if none).
    """

    run_id: str
    task_id: str
    created_at: datetime
    hwm: str
    orphan_checkpoints: int
    trace_events: int
    lease_live: bool
    owner_worker: str
    target: str


@dataclass(frozen=True)
class DiscardReport:
    """What :func:`run_discard` removed.

    Attributes:
        run_id: the discarded run.
        operator: who asked.
        orphan_checkpoints: uncommitted checkpoint rows deleted.
        trace_events: trace events deleted.
        hwm_removed: an HWM row (at generation 0) was deleted.
        target_removed: the prepared environment directory deleted, or ``None``.
        target_kept: the environment directory left in place (not prepared by Ratchet), or ``None``.
    """

    run_id: str
    operator: str
    orphan_checkpoints: int
    trace_events: int
    hwm_removed: bool
    target_removed: str | None
    target_kept: str | None

    def line(self) -> str:
        """One log line naming everything that was removed."""
        parts = [
            f"run {self.run_id} discarded by {self.operator}",
            f"orphan checkpoints={self.orphan_checkpoints}",
            f"trace events={self.trace_events}",
            f"hwm row={'removed' if self.hwm_removed else 'absent'}",
        ]
        if self.target_removed:
            parts.append(f"removed prepared target {self.target_removed}")
        if self.target_kept:
            parts.append(f"kept target {self.target_kept}")
        return "; ".join(parts)


def _hwm_scope(run: Run) -> Q:
    return Q(task_id=run.task_id, run_id=run.run_id, environment_instance_id=run.environment_instance_id)


def _hwm_generation(run: Run) -> int | None:
    """The run's HWM generation, or ``None`` when the row is missing.

    Raises:
        HighWaterMarkMissingError: the HWM store cannot be read (fail closed: maybe committed).
    """
    alias = hwm_alias()
    try:
        with transaction.atomic(using=alias):  # a savepoint inside the caller's transaction
            return (HighWaterMark.objects.using(alias).filter(_hwm_scope(run))
                    .values_list("generation", flat=True).first())
    except (OperationalError, ProgrammingError) as exc:
        raise HighWaterMarkMissingError(
            f"the high-water mark store is unavailable ({type(exc).__name__}): refusing to call the "
            "run half-created", run_id=run.run_id, alias=alias,
        ) from None


def _refusal(run: Run, hwm_generation: int | None) -> str | None:
    """Why ``run`` is not half-created, or ``None`` when it is."""
    if run.state_version != 0 or run.generation != 0:
        return f"the run committed a checkpoint (state version {run.state_version}, generation {run.generation})"
    if hwm_generation is not None and hwm_generation != 0:
        return f"the run's high-water mark is at generation {hwm_generation}"
    if IdempotencyRecord.objects.filter(run_id=run.run_id).exists():
        return "the run holds idempotency records"
    if LedgerEntry.objects.filter(run_id=run.run_id).exists():
        return "the run holds receipts-ledger entries"
    if ReviewCase.objects.filter(run_id=run.run_id).exists():
        return "the run has review cases"
    return None


def _prepared_target(run: Run) -> tuple[Path | None, Path | None]:
    """``(removable, kept)``: the run's environment directory, removable only when run creation
    prepared it for this run (a ``setup`` other than ``none`` names it by the run id)."""
    spec = run.spec or {}
    target = spec.get("target")
    if not isinstance(target, str) or not target:
        return None, None
    path = Path(target)
    setup = ((spec.get("task") or {}).get("environment") or {}).get("setup", "none")
    if setup != "none" and path.name == run.run_id and not path.is_symlink():
        return path, None
    return None, path


def run_find_half_created(*, limit: int | None = None) -> list[HalfCreatedRun]:
    """Runs that died before their first checkpoint, oldest first (see the module docstring).

    Args:
        limit: at most this many (None: all).

    Raises:
        HighWaterMarkMissingError: the HWM store cannot be read.
    """
    candidates = (Run.objects.filter(state_version=0, generation=0).order_by("created_at", "run_id"))
    found: list[HalfCreatedRun] = []
    for run in candidates.iterator():
        hwm_generation = _hwm_generation(run)
        if _refusal(run, hwm_generation) is not None:
            continue
        found.append(HalfCreatedRun(
            run_id=run.run_id,
            task_id=run.task_id,
            created_at=run.created_at,
            hwm="missing" if hwm_generation is None else "generation 0",
            orphan_checkpoints=Checkpoint.objects.filter(run_id=run.run_id).count(),
            trace_events=TraceEvent.objects.filter(run_id=run.run_id).count(),
            lease_live=Run.objects.filter(_LIVE_LEASE, run_id=run.run_id).exists(),
            owner_worker=run.owner_worker,
            target=str((run.spec or {}).get("target") or ""),
        ))
        if limit is not None and len(found) >= limit:
            break
    return found


def run_discard(*, run_id: str, operator: str, remove_target: bool = True) -> DiscardReport:
    """Delete a half-created run and everything it left (see the module docstring).

    Args:
        run_id: the run.
        operator: who asks (non-empty); recorded in the log line.
        remove_target: also delete the environment directory run creation prepared for this run.

    Returns:
        A :class:`DiscardReport`; its :meth:`~DiscardReport.line` is logged at WARNING.

    Raises:
        RunNotFoundError: no such run (or another operator discarded it first).
        RunDiscardRefusedError: the run is not half-created; nothing was deleted.
        LeaseHeldError: a worker (perhaps its creator) holds an unexpired lease; retry later.
        HighWaterMarkMissingError: the HWM store cannot be read; nothing was deleted.
        ValueError: empty operator.
    """
    if not operator:
        raise ValueError("operator must name who discards the run")
    alias = hwm_alias()
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(run_id=run_id).first()
        if run is None:
            raise RunNotFoundError(run_id=run_id)
        hwm_generation = _hwm_generation(run)
        refusal = _refusal(run, hwm_generation)
        if refusal is not None:
            raise RunDiscardRefusedError(refusal, run_id=run_id)
        if Run.objects.filter(_LIVE_LEASE, run_id=run_id).exists():
            raise LeaseHeldError("the run's creator (or another worker) still holds its lease",
                                 run_id=run_id, holder=run.owner_worker)
        orphans, _ = Checkpoint.objects.filter(run_id=run_id).delete()
        events, _ = TraceEvent.objects.filter(run_id=run_id).delete()
        hwm_removed = False
        if alias == DEFAULT_DB_ALIAS and hwm_generation is not None:
            hwm_removed = HighWaterMark.objects.filter(_hwm_scope(run), generation=0).delete()[0] == 1
        # The same conditions once more, now as the delete's own filter: exactly one row or nothing.
        try:
            deleted, _ = Run.objects.filter(run_id=run_id, state_version=0, generation=0).delete()
        except ProtectedError as exc:
            # Rows this module does not know about still point at the run: evidence, keep it all.
            raise RunDiscardRefusedError(
                f"the run is still referenced by {sorted({type(o).__name__ for o in exc.protected_objects})}",
                run_id=run_id,
            ) from None
        if deleted != 1:
            raise RunDiscardRefusedError("the run changed while it was being discarded", run_id=run_id)
    if alias != DEFAULT_DB_ALIAS and hwm_generation is not None:
        with transaction.atomic(using=alias):
            hwm_removed = (HighWaterMark.objects.using(alias).filter(_hwm_scope(run), generation=0)
                           .delete()[0] == 1)
    removable, kept = _prepared_target(run)
    removed = None
    if removable is not None and remove_target and removable.exists():
        shutil.rmtree(removable)
        removed = str(removable)
    elif removable is not None and remove_target is False:
        kept = removable
    report = DiscardReport(
        run_id=run_id,
        operator=operator,
        orphan_checkpoints=orphans,
        trace_events=events,
        hwm_removed=hwm_removed,
        target_removed=removed,
        target_kept=str(kept) if kept is not None and kept.exists() else None,
    )
    logger.warning("%s", report.line())
    return report
