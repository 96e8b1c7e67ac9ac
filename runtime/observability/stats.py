"""Recovery metrics computed from stored trace events (DESIGN.md section 8).

* recovery success rate = succeeded / (succeeded + failed) decided recoveries. A recovery starts
  with ``recovery.started`` and is decided by the run's first decisive event after it
  (``runtime.observability.rules``): it **fails** when the run freezes (``needs_review``) or fails
  (``failed``, or ``recovery.failed``: the restore failed closed) before its next completed
  write, however many checkpoints later that is; it succeeds at that completed write (or when
  the run ends completed or cancelled). Restoring the checkpoint is not recovering the run:
  fail-closed freezes are counted so that a rollout watching this rate sees them. Recoveries
  not decided yet (the run is still in flight) are reported as ``open`` and left out of the rate.
* recovery duration     = median and p95 of ``duration_seconds`` of ``recovery.succeeded`` events
  of succeeded recoveries (seconds)
* duplicate submissions = sum of ``duplicates`` in ``audit.effects`` events (effects beyond the
  first per idempotency key, counted in the adapter's own records when a run completes)

This is the whole-trace computation (``manage.py recovery_stats``, the health page, and the
reference the counters of ``runtime.observability.metrics`` are tested against); ``/metrics`` reads the
counters instead.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from runtime.models import TraceEvent
from runtime.observability.rules import FAILED, FROZEN, SUCCEEDED, recovery_decision

__all__ = ["FROZEN", "RecoveryStats", "recovery_stats"]

_WALKED = ("recovery.started", "recovery.succeeded", "recovery.failed", "write.executed",
           "write.reconciled", "checkpoint.committed")


@dataclass(frozen=True)
class RecoveryStats:
    """Recovery metrics. Durations in seconds; ``success_rate`` in [0, 1], None without recoveries.

    ``frozen`` counts the failed recoveries decided by a freeze (``needs_review``); ``open`` the
    recoveries not decided yet (not in ``recoveries``).
    """

    recoveries: int
    succeeded: int
    failed: int
    success_rate: float | None
    duration_median_seconds: float | None
    duration_p95_seconds: float | None
    duplicate_submissions: int
    audited_runs: int
    frozen: int = 0
    open: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _p95(values: list[float]) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[94]


@dataclass
class _Walk:
    """One run's recoveries while its events are read in order."""

    phase: str = ""
    open: list[float | None] = field(default_factory=list)
    """Per open recovery: its ``recovery.succeeded`` duration (None until traced)."""
    nothing_to_recover: bool = False
    awaiting_outcome: bool = False
    """A ``recovery.started`` whose own ``recovery.succeeded``/``failed`` is not read yet."""


def recovery_stats(*, run_ids: list[str] | None = None) -> RecoveryStats:
    """Compute :class:`RecoveryStats` over all runs, or over ``run_ids`` (two queries).

    Reads, for the runs that had a recovery, their recovery events, completed writes and
    checkpoint commits in ``seq`` order, and applies ``runtime.observability.rules``.

    Args:
        run_ids: restrict to these runs (None: every run).
    """
    recovered = TraceEvent.objects.filter(event_type__in=("recovery.started", "recovery.succeeded",
                                                          "recovery.failed"))
    audits = TraceEvent.objects.filter(event_type="audit.effects")
    if run_ids is not None:
        recovered = recovered.filter(run_id__in=run_ids)
        audits = audits.filter(run_id__in=run_ids)
    events = (TraceEvent.objects.filter(event_type__in=_WALKED,
                                        run_id__in=recovered.values("run_id"))
              .order_by("run_id", "seq").values_list("run_id", "event_type", "payload"))
    durations: list[float] = []
    succeeded = failed = frozen = 0
    walks: dict[str, _Walk] = {}
    for run_id, event_type, payload in events.iterator():
        walk = walks.setdefault(run_id, _Walk())
        decision = recovery_decision(event_type, payload)
        lone = event_type in ("recovery.succeeded", "recovery.failed") and not walk.awaiting_outcome
        if event_type in ("recovery.succeeded", "recovery.failed"):
            walk.awaiting_outcome = False
        if event_type == "recovery.started":
            walk.awaiting_outcome = True
            walk.open.append(None)
            walk.nothing_to_recover = walk.phase == FROZEN
        elif lone:
            # No recovery.started of its own before it (a trace written before the engine traced
            # starts): the event decides its own recovery, as it always did.
            succeeded += event_type == "recovery.succeeded"
            failed += event_type == "recovery.failed"
            if event_type == "recovery.succeeded":
                durations.append(float(payload.get("duration_seconds", 0.0)))
            continue
        elif event_type == "recovery.succeeded" and walk.open:
            walk.open[-1] = float(payload.get("duration_seconds", 0.0))
            if walk.nothing_to_recover:
                decision = SUCCEEDED
        if decision == SUCCEEDED:
            # A recovery killed before it traced its own success succeeds with the run (untimed).
            succeeded += len(walk.open)
            durations.extend(d for d in walk.open if d is not None)
            walk.open.clear()
        elif decision == FAILED:
            failed += len(walk.open)
            if event_type == "checkpoint.committed" and payload.get("phase") == FROZEN:
                frozen += len(walk.open)
            walk.open.clear()
        if event_type == "checkpoint.committed":
            walk.phase = str(payload.get("phase", ""))
            walk.nothing_to_recover = False
    duplicates = 0
    audited = 0
    for payload in audits.values_list("payload", flat=True).iterator():
        audited += 1
        duplicates += int(payload.get("duplicates", 0))
    total = succeeded + failed
    durations.sort()
    return RecoveryStats(
        recoveries=total,
        succeeded=succeeded,
        failed=failed,
        success_rate=(succeeded / total) if total else None,
        duration_median_seconds=statistics.median(durations) if durations else None,
        duration_p95_seconds=_p95(durations) if durations else None,
        duplicate_submissions=duplicates,
        audited_runs=audited,
        frozen=frozen,
        open=sum(len(w.open) for w in walks.values()),
    )
