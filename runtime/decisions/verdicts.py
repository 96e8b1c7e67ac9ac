"""How a run ended, as a script sees it: one exit code per outcome (DESIGN.md section 6 and 8).

``manage.py run`` and ``manage.py resume`` exit 0 only when the run completed. Every other way a
call can end has its own code, so a script that trusts the exit code can never report a frozen
or failed run as passed:

====  ===================  ===============================================================
code  outcome              meaning
====  ===================  ===============================================================
0     completed            the run completed and its verifier passed
1     error                the command could not drive the run (bad task spec, lease held by
                           another worker, restore failed closed, ...); nothing was decided
2     usage                bad command-line arguments (argparse)
3     failed               the run ended failed (verifier failed, budget used, reviewer abort)
4     cancelled            an operator cancelled the run
5     needs_review         the run is frozen for a human (receipt conflict, drift, adapter
                           refusal, unknown outcome); ``manage.py cases list`` shows why
6     awaiting_approval    the run waits for an approval (``manage.py approvals list``)
7     unfinished           the command stopped early (``--max-steps``); the run can go on
====  ===================  ===============================================================

Codes 1 and 2 are what Django and argparse already use for errors and usage, so the verdict
codes start at 3 and never collide with them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import IntEnum
from typing import Any

from runtime.core import Phase
from runtime.engine import StepReport
from runtime.errors import RatchetError


class RunExit(IntEnum):
    """Exit codes of ``run`` and ``resume`` (see the module docstring for the table)."""

    COMPLETED = 0
    ERROR = 1
    USAGE = 2
    FAILED = 3
    CANCELLED = 4
    NEEDS_REVIEW = 5
    AWAITING_APPROVAL = 6
    UNFINISHED = 7


_BY_PHASE = {
    Phase.COMPLETED: RunExit.COMPLETED,
    Phase.FAILED: RunExit.FAILED,
    Phase.CANCELLED: RunExit.CANCELLED,
    Phase.NEEDS_REVIEW: RunExit.NEEDS_REVIEW,
    Phase.AWAITING_APPROVAL: RunExit.AWAITING_APPROVAL,
    Phase.RUNNING: RunExit.UNFINISHED,
    Phase.PENDING: RunExit.UNFINISHED,
}

EXIT_CODES_HELP = (
    "Exit codes: 0 completed; 1 error (nothing decided: bad spec, lease held, restore failed closed); "
    "2 usage; 3 failed; 4 cancelled; 5 needs_review (frozen for a human); 6 awaiting_approval; "
    "7 unfinished (stopped by --max-steps)."
)
"""One-paragraph summary of :class:`RunExit` for the commands' ``--help``."""


@dataclass(frozen=True)
class Verdict:
    """The outcome of one ``run``/``resume`` call, printed as one JSON object by ``--json``.

    Attributes:
        run_id: the run.
        outcome: the :class:`RunExit` name in lower case (``"completed"``, ``"needs_review"``...).
        exit_code: the process exit code (:class:`RunExit` value).
        phase: the run's phase after the call.
        stop_reason: why it stopped or froze, or ``None``.
        generation: the committed checkpoint generation after the call.
        steps: checkpoints this call committed.
        writes: writes the plan has passed (the plan cursor; 0 before the first).
        recovered: this call recovered from a worker that died or stalled.
        stop_detail: what a person reads first about a freeze or failure (the adapter's refusal
            reason, the planner's error; at most 4000 characters), or ``None``.
    """

    run_id: str
    outcome: str
    exit_code: int
    phase: str
    stop_reason: str | None
    generation: int
    steps: int
    writes: int
    recovered: bool
    stop_detail: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The verdict as a JSON-ready dict (the ``--json`` object)."""
        return asdict(self)

    def line(self) -> str:
        """The human-readable verdict: ``verdict: <phase> (<reason>) generation=.. writes=..``,
        preceded by a ``reason: ...`` line when the run froze or failed with a detail (so the
        terminal says why, not only the dashboard)."""
        reason = f" ({self.stop_reason})" if self.stop_reason else ""
        recovered = " recovered" if self.recovered else ""
        verdict = (f"verdict: {self.phase}{reason} generation={self.generation} writes={self.writes}"
                   f"{recovered} exit={self.exit_code}")
        if self.stop_detail and self.exit_code not in (RunExit.COMPLETED, RunExit.UNFINISHED):
            return f"reason: {' '.join(self.stop_detail.split())}\n{verdict}"
        return verdict


def run_verdict(*, report: StepReport) -> Verdict:
    """The verdict of a :class:`~runtime.engine.StepReport` (what ``run_advance`` returned).

    Raises:
        ValueError: the report names a phase this code does not know (a newer schema).
    """
    try:
        code = _BY_PHASE[Phase(report.phase)]
    except ValueError:
        raise ValueError(f"run {report.run_id}: unknown phase {report.phase!r}") from None
    return Verdict(
        run_id=report.run_id,
        outcome=code.name.lower(),
        exit_code=int(code),
        phase=report.phase,
        stop_reason=report.stop_reason or None,
        generation=report.generation,
        steps=report.steps,
        writes=max(report.cursor, 0),
        recovered=report.recovered,
        stop_detail=report.stop_detail,
    )


def error_verdict(*, run_id: str | None, error: RatchetError) -> dict[str, Any]:
    """The ``--json`` object when the command could not drive the run (exit code 1).

    Carries the error class, its message (never key material: errors do not hold any) and
    whether retrying the same command can help (``retryable``, e.g. a lease still held).
    """
    return {
        "run_id": run_id,
        "outcome": RunExit.ERROR.name.lower(),
        "exit_code": int(RunExit.ERROR),
        "error": type(error).__name__,
        "message": str(error),
        "retryable": bool(error.retryable),
    }
