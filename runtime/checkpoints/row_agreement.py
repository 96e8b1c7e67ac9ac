"""Before leaving a run alone because its row says so, ask the signed checkpoint (DESIGN.md
section 4.10).

A worker drops the message of a run whose row is finished or frozen, and ``resume`` reports a
finished row's phase without stepping. Both are decisions made from an unsigned copy; this
module confirms the copy against the committed checkpoint first, so an edited row fails closed
(a review case, ``restore.refused`` traced, a typed error) instead of silently stopping a live run.
"""

from __future__ import annotations

from runtime.checkpoints.checks import run_load
from runtime.checkpoints.protocol import checkpoint_restore
from runtime.checkpoints.refusal_freeze import restore_refusal_freeze
from runtime.errors import CheckpointError, DerivedRowMismatchError, RunArchivedError, SigningError
from runtime.models import Checkpoint


def run_row_confirm(*, run_id: str, worker: str) -> None:
    """Check that ``run_id``'s row agrees with its signed committed checkpoint.

    Args:
        run_id: the run whose row a caller is about to act on.
        worker: who asks (kept in the ``restore.refused`` payload).

    Raises:
        RunNotFoundError: no such run.
        RunArchivedError: the run was archived (DESIGN.md section 4.11); nothing is traced.
        DerivedRowMismatchError: the row's phase or stop reason is not the signed one at the same
            generation; traced as ``restore.refused`` first, so the sweeper leaves the run to a
            person (``runtime.workers.sweeper``).
        CheckpointError / SigningError: the committed checkpoint does not restore at all
            (traced the same way).
    """
    run = run_load(run_id=run_id)
    try:
        if run.archived_at is not None:
            # An archived run's evidence is its bundle; its checkpoints are gone. A row that says
            # archived while they are still stored was edited (DESIGN.md section 4.11).
            if Checkpoint.objects.filter(run_id=run_id).exists():
                raise DerivedRowMismatchError(
                    "the run row says archived but its checkpoints are still stored", run_id=run_id,
                    row="archived", signed=run.phase)
            raise RunArchivedError(run_id=run_id, location=run.archive_location, digest=run.archive_digest)
        checkpoint_restore(run_id=run_id, scenario_fingerprint=run.scenario_fingerprint)
    except (CheckpointError, SigningError) as exc:
        restore_refusal_freeze(run_id=run_id, error=exc, worker=worker, recovering=False)
        raise
