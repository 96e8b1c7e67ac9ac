"""Completing a commit whose high-water mark did not move (DESIGN.md section 4.3).

With the mark in its own database (the default, section 4.2) an advance commits the main
database first -- run row, ledger rows, checkpoint row and trace in one transaction, the commit
point -- and then the mark's compare-and-set ``g -> g+1`` in the mark's database. A worker that
dies in between (or finds the mark store unreachable) leaves the run row naming ``g+1`` and its
digest while the mark still says ``g``. :func:`hwm_committed` finishes such a commit before
anything reads the mark as the committed generation: exactly once, to exactly the checkpoint
the run row names, and only after that row's bytes hash to the named digest, its MAC verifies
and its identity is the run's. Anything else ahead of the mark fails closed.
"""

from __future__ import annotations

import logging

from django.db import router

from runtime.checkpoints.checks import run_identity_check, stored_envelope_open
from runtime.checkpoints.high_water_marks import HighWaterMarkInfo, hwm_advance, hwm_read
from runtime.core.canonical import digest_bytes
from runtime.database.statements import compiled_rows
from runtime.errors import (
    CheckpointCorruptError,
    CheckpointNotFoundError,
    HighWaterMarkBehindError,
    HighWaterMarkMissingError,
    RatchetError,
    StaleGenerationError,
)
from runtime.models import Checkpoint, Run

logger = logging.getLogger("runtime.checkpoints.mark_completion")


def _named_bytes(run: Run) -> bytes:
    """The stored envelope the run row names (generation and digest), checked against its
    digest; read through a SELECT compiled once per process.

    Raises:
        CheckpointNotFoundError: no row of that generation and digest is stored.
        CheckpointCorruptError: the stored bytes do not hash to the digest.
    """
    rows = compiled_rows(alias=router.db_for_read(Checkpoint), shape=("named_checkpoint",),
                         slots={"run_id": run.run_id, "generation": run.generation,
                                "digest": run.checkpoint_digest},
                         build=lambda s: Checkpoint.objects.filter(
                             run_id=s["run_id"], generation=s["generation"], digest=s["digest"])
                         .values_list("envelope")[:1])
    if not rows:
        raise CheckpointNotFoundError(
            "the run row names a committed checkpoint that is not stored: refusing to move the "
            "high-water mark", run_id=run.run_id, generation=run.generation)
    raw = bytes(rows[0][0])
    if digest_bytes(raw) != run.checkpoint_digest:
        raise CheckpointCorruptError(run_id=run.run_id, generation=run.generation)
    return raw


def _mirror_catch_up(run: Run, hwm: HighWaterMarkInfo) -> None:
    """Bring a run row that lags its mark up to it, compare-and-set on what was read.

    An earlier release moved the mark before the run row, and a commit that stopped in between
    left the row one behind; the fence names the generation a commit extends (DESIGN.md section
    4.3), so such a run could never commit again. A row that moved meanwhile (a commit raced the
    read) is left alone.
    """
    Run.objects.filter(run_id=run.run_id, generation=run.generation,
                       state_version=run.state_version).update(
        generation=hwm.generation, checkpoint_digest=hwm.digest)


def hwm_committed(*, run: Run) -> HighWaterMarkInfo:
    """The run's high-water mark, after completing the one commit it may lag behind.

    A run row behind its mark is brought up to it (:func:`_mirror_catch_up`). When the run row
    (read before the mark, so a commit racing this read can only make the row look older) names
    generation ``mark + 1``, that commit's main transaction committed and its
    mark's compare-and-set did not happen: the named checkpoint is verified (bytes hash to the
    named digest, MAC, identity) and the mark is moved to it by compare-and-set. A mark that
    another process moved to exactly that commit, or past it, meanwhile is the same outcome.

    Args:
        run: the run row, freshly read.

    Returns:
        The mark (generation and envelope digest) every reader may take as committed.

    Raises:
        HighWaterMarkMissingError: the mark's row, table or database is missing.
        HighWaterMarkBehindError: the run row is more than one generation ahead of the mark, or
            one ahead without naming a digest (the mark store lost commits, or the main database
            was altered): nothing is moved.
        CheckpointNotFoundError / CheckpointCorruptError: the named checkpoint is missing or its
            bytes do not hash to the named digest.
        BadSignatureError / UnknownKeyError / CheckpointError subclasses: it does not open.
        IdentityMismatchError / ScenarioMismatchError: it is not this run's.
        StaleGenerationError: the mark moved meanwhile to another commit of the same generation
            or an earlier one (never by this protocol).
    """
    hwm = hwm_read(run=run)
    if run.generation < hwm.generation:
        _mirror_catch_up(run, hwm)
    if run.generation <= hwm.generation:
        return hwm
    if run.generation != hwm.generation + 1 or not run.checkpoint_digest:
        raise HighWaterMarkBehindError(run_id=run.run_id, generation=run.generation,
                                       hwm_generation=hwm.generation)
    if hwm.generation and not Checkpoint.objects.filter(run_id=run.run_id, generation=hwm.generation,
                                                        digest=hwm.digest).exists():
        # A mark one commit behind is completed only when it is a real earlier commit: a mark
        # whose generation was edited down still names the newer checkpoint's digest.
        raise HighWaterMarkBehindError(
            "the high-water mark names a checkpoint that is not stored at its generation: refusing "
            "to complete it", run_id=run.run_id, generation=run.generation, hwm_generation=hwm.generation)
    raw = _named_bytes(run)
    envelope = stored_envelope_open(raw=raw, run_id=run.run_id, generation=run.generation)
    if envelope.generation != run.generation:
        raise CheckpointCorruptError(
            f"the checkpoint stored as generation {run.generation} is sealed as generation "
            f"{envelope.generation}", run_id=run.run_id, generation=run.generation)
    run_identity_check(run=run, envelope=envelope)
    done = HighWaterMarkInfo(generation=run.generation, digest=run.checkpoint_digest)
    try:
        hwm_advance(run=run, expected=hwm.generation, generation=done.generation,
                    digest=done.digest)
    except StaleGenerationError:
        # (A mark moved to exactly this commit by its writer or another reader is success in
        # hwm_advance itself.) Past it: a later commit moved it on after this run row was read.
        now = hwm_read(run=run)
        if now.generation <= done.generation:
            raise
        return now
    logger.warning(
        "run %s: the commit of generation %d reached its commit point but not its high-water "
        "mark (the writer stopped in between); the mark now records it", run.run_id,
        done.generation)
    return done


def hwm_for_display(*, run: Run, stored: HighWaterMarkInfo | None = None) -> HighWaterMarkInfo | None:
    """The mark a page or report shows for ``run``: one that lags its run row by one commit is
    completed first, as a restore would (:func:`hwm_committed`), so a run that finished while
    its mark store was away does not show its previous generation as the committed one.

    Args:
        run: the run row.
        stored: the mark already read (in bulk, for a list page); None reads it here.

    Returns:
        The mark, or None when it is missing. When completing it fails closed (the named
        checkpoint does not verify, the run row is further ahead), the mark as stored: each
        stored row then shows its own verdict, and a restore refuses as it always did.
    """
    if stored is not None and run.generation <= stored.generation:
        return stored
    try:
        return hwm_committed(run=run)
    except HighWaterMarkMissingError:
        return None
    except RatchetError:
        pass  # fails closed for a restore; a page shows the mark as stored
    if stored is not None:
        return stored
    try:
        return hwm_read(run=run)
    except HighWaterMarkMissingError:
        return None
