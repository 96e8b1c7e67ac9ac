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
from runtime.core.checkpoint import RunState
from runtime.core.derived_rows import ROW_ONLY_FREEZES, case_rows_disagreement
from runtime.errors import CheckpointError, DerivedRowMismatchError, RunArchivedError, SigningError
from runtime.evidence.trace import trace_verify
from runtime.models import Checkpoint, ReviewCase, Run


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


def run_row_findings(*, run_id: str, state: RunState) -> list[str]:
    """What the main database's unsigned rows of ``run_id`` say that its signed state does not.

    ``checkpoint verify`` reports these beside the checkpoint's own evidence findings, so every
    edit of a main-database row is named (DESIGN.md section 4.10): the trace's hash chain and
    anchored head, review case rows whose status the checkpoint does not record, and a run row
    frozen without a checkpoint saying so (a refused restore or a ledger that did not verify).

    Args:
        run_id: the run.
        state: its committed, verified state (from ``checkpoint_verify``).

    Returns:
        One line per finding; empty when the rows agree.

    Raises:
        RunNotFoundError: no such run.
    """
    findings = []
    chain = trace_verify(run_id=run_id)
    if not chain.ok:
        findings.append(f"trace: {chain.reason}")
    rows = list(ReviewCase.objects.filter(run_id=run_id).values_list("case_id", "status"))
    findings += case_rows_disagreement(rows=rows, signed=[(ref.case_id, ref.status.value)
                                                         for ref in state.review_cases])
    run = Run.objects.filter(run_id=run_id).values("phase", "stop_reason").first()
    if run is not None and (run["phase"], run["stop_reason"]) in ROW_ONLY_FREEZES:
        findings.append(f"the run row is frozen without a checkpoint ({run['stop_reason']}); the signed "
                        f"checkpoint says {state.phase.value}: see the run's open review case")
    return findings
