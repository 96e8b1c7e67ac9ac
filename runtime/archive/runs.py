"""Archiving one finished run crash-safely, and one pass over many (DESIGN.md section 4.11).

Per run, in this order:

1. the signed evidence bundle is exported (``runtime.bundles.export``; its checks run: a run
   whose evidence does not verify is skipped and reported, never archived);
2. it is written to the archive storage, fsync'd, read back and re-hashed
   (:mod:`.bundle_store`);
3. in one transaction holding the run's row lock, the run is checked once more (still
   archivable, and its trace head and state version are the ones the bundle holds), the
   bundle's location and digest are recorded on the run row, and its checkpoints, trace events,
   receipts-ledger entries, idempotency records, search terms, decided review cases, gateway
   tokens and recovery watch are deleted.

A process killed before step 3 commits leaves the run intact (at most a stored bundle nothing
names, which the next pass replaces); after it, the run is archived. There is no third state,
so re-running a killed pass finishes the job. The run row, its high-water mark and its
combination pin stay: the runs list shows the run, and the mark never moves back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models.functions import Now

from runtime.archive.bundle_store import bundle_store
from runtime.archive.selection import ArchiveSelection, archive_candidates, still_archivable
from runtime.bundles.export import bundle_export
from runtime.core.canonical import canonical_json
from runtime.core.crashpoints import crash_point, register
from runtime.errors import RatchetError, RunArchiveRefusedError
from runtime.models import (
    Checkpoint,
    GatewayToken,
    IdempotencyRecord,
    LedgerEntry,
    RecoveryWatch,
    ReviewCase,
    Run,
    RunSearchTerm,
    TraceEvent,
)

logger = logging.getLogger("runtime.archive")

CP_BUNDLE_STORED = register("archive.bundle_stored",
                            "archive: bundle stored and fsync'd, nothing recorded or removed yet")
CP_ROWS_REMOVED = register("archive.rows_removed",
                           "archive: rows deleted and record written inside the transaction, not committed")

BULKY_MODELS = (TraceEvent, Checkpoint, LedgerEntry, IdempotencyRecord, RunSearchTerm, ReviewCase,
                GatewayToken)
"""The per-run rows an archived run no longer holds (their content is in the bundle)."""


@dataclass
class ArchiveOutcome:
    """What one pass did (or, dry, would do).

    Attributes:
        dry_run: nothing was written or removed.
        candidates: run ids selected.
        archived: run id -> ``(bundle location, digest)`` of the runs archived by this pass.
        skipped: run id -> why it was left intact (its evidence failed to export, it changed,
            or the storage failed).
        rows: model name -> rows the archived runs held (removed), or would remove when dry.
        attachments_removed: attachments only archived runs referenced, removed after the pass.
    """

    dry_run: bool
    candidates: list[str] = field(default_factory=list)
    archived: dict[str, tuple[str, str]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    attachments_removed: int = 0

    def summary(self) -> str:
        """A few lines for the command line and the log."""
        verb = "would archive" if self.dry_run else "archived"
        count = len(self.candidates) if self.dry_run else len(self.archived)
        rows = ", ".join(f"{name} {n}" for name, n in sorted(self.rows.items()) if n) or "none"
        lines = [f"{verb} {count} run(s); rows {'to remove' if self.dry_run else 'removed'}: {rows}"]
        if not self.dry_run:
            lines.append(f"attachments removed: {self.attachments_removed}")
        lines += [f"skipped {run_id}: {why}" for run_id, why in sorted(self.skipped.items())]
        return "\n".join(lines)


def run_rows(run_ids: list[str]) -> dict[str, int]:
    """Rows of each :data:`BULKY_MODELS` model the runs hold (what archiving them removes)."""
    return {model.__name__: model.objects.filter(run_id__in=run_ids).count() for model in BULKY_MODELS}


def run_archive(*, run_id: str) -> tuple[str, str, dict[str, int]]:
    """Archive one run (see the module docstring); return ``(location, digest, rows removed)``.

    Raises:
        BundleExportError / CheckpointError / SigningError / KeyringError: the bundle cannot be
            made; nothing changed.
        ArchiveStorageError: the storage failed; nothing changed in the database.
        RunArchiveRefusedError: the run is not (or no longer) archivable; nothing changed.
    """
    bundle = bundle_export(run_id=run_id, exported_by="archive")
    data = canonical_json(bundle)
    location, digest = bundle_store(run_id=run_id, data=data)
    crash_point(CP_BUNDLE_STORED)
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(run_id=run_id).first()
        if run is None or run_id not in still_archivable([run_id]):
            raise RunArchiveRefusedError("the run is no longer archivable (it changed, was archived "
                                         "or a live run now needs it)", run_id=run_id)
        if (run.trace_seq, run.trace_head, run.generation) != (
                bundle["run"]["trace_seq"], bundle["run"]["trace_head"], bundle["run"]["generation"]):
            raise RunArchiveRefusedError("the run changed after its bundle was exported", run_id=run_id)
        rows: dict[str, int] = {}
        for model in BULKY_MODELS:
            rows[model.__name__] = model.objects.filter(run_id=run_id).delete()[0]
        RecoveryWatch.objects.filter(run_id=run_id).delete()
        Run.objects.filter(run_id=run_id).update(archived_at=Now(), archive_location=location,
                                                 archive_digest=digest)
        crash_point(CP_ROWS_REMOVED)
    logger.info("run %s archived to %s (%s)", run_id, location, digest)
    return location, digest, rows


def archive_pass(*, selection: ArchiveSelection, apply: bool,
                 progress: Callable[[str], None] | None = None) -> ArchiveOutcome:
    """Archive every run ``selection`` picks (``apply``), or report what would go (dry).

    Each run is archived on its own (:func:`run_archive`): one failing is reported in
    ``skipped`` and the pass goes on. After the runs, attachments no unarchived run references
    are removed (:func:`runtime.archive.sweep.attachments_sweep`).

    Raises:
        ValueError: the selection could take an unfinished run (:func:`selection_check`).
    """
    from runtime.archive.sweep import attachments_sweep

    outcome = ArchiveOutcome(dry_run=not apply, candidates=archive_candidates(selection))
    if not apply:
        outcome.rows = run_rows(outcome.candidates)
        return outcome
    for run_id in outcome.candidates:
        try:
            location, digest, rows = run_archive(run_id=run_id)
        except RatchetError as exc:
            outcome.skipped[run_id] = str(exc)
            logger.warning("run %s not archived: %s", run_id, exc)
            continue
        outcome.archived[run_id] = (location, digest)
        for name, n in rows.items():
            outcome.rows[name] = outcome.rows.get(name, 0) + n
        if progress is not None:
            progress(f"archived {run_id} -> {location}")
    outcome.attachments_removed = attachments_sweep()
    return outcome
