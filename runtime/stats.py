"""Recovery metrics computed from stored trace events (DESIGN.md section 8).

* recovery success rate = succeeded / (succeeded + failed) recoveries, where a recovery is the
  ``recovery.succeeded`` / ``recovery.failed`` event a worker traces after taking over a run
  whose previous worker died. A ``recovery.succeeded`` still counts as **failed** when that
  recovery froze the run for a human: the first checkpoint committed after its
  ``recovery.started`` put a run that was not frozen before into ``needs_review`` (the cached
  receipt is gone from the adapter, cache and adapter drifted, the environment drifted while the
  worker was dead, ...). Restoring the checkpoint is not recovering the run; fail-closed freezes
  are counted so that a rollout watching this rate sees them.
* recovery duration     = median and p95 of ``duration_seconds`` of succeeded recoveries (seconds)
* duplicate submissions = sum of ``duplicates`` in ``audit.effects`` events (effects beyond the
  first per idempotency key, counted in the adapter's own records when a run completes)
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from django.db.models import OuterRef, Subquery

from runtime.models import TraceEvent

FROZEN = "needs_review"
"""Phase value of a run frozen for review."""


@dataclass(frozen=True)
class RecoveryStats:
    """Recovery metrics. Durations in seconds; ``success_rate`` in [0, 1], None without recoveries.

    ``frozen`` counts the failed recoveries that restored the run but froze it for review.
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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _p95(values: list[float]) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[94]


def _phase_of_commit(*, before: bool) -> Subquery:
    """Phase of the run's last checkpoint commit before (or first after) the outer event."""
    commits = TraceEvent.objects.filter(run_id=OuterRef("run_id"),
                                        event_type="checkpoint.committed")
    if before:
        commits = commits.filter(seq__lt=OuterRef("seq")).order_by("-seq")
    else:
        commits = commits.filter(seq__gt=OuterRef("seq")).order_by("seq")
    return Subquery(commits.values("payload__phase")[:1])


def recovery_stats(*, run_ids: list[str] | None = None) -> RecoveryStats:
    """Compute :class:`RecoveryStats` over all runs, or over ``run_ids`` (one query).

    Args:
        run_ids: restrict to these runs (None: every run).
    """
    events = TraceEvent.objects.filter(
        event_type__in=("recovery.started", "recovery.succeeded", "recovery.failed",
                        "audit.effects")
    ).annotate(phase_before=_phase_of_commit(before=True),
               phase_after=_phase_of_commit(before=False)).order_by("run_id", "seq")
    if run_ids is not None:
        events = events.filter(run_id__in=run_ids)
    durations: list[float] = []
    failed = 0
    frozen = 0
    duplicates = 0
    audited = 0
    # The recovery.started that opened the recovery being read, per run: its surrounding commits
    # say whether the recovery froze a run that was not frozen before it.
    started: dict[str, tuple[Any, Any]] = {}
    rows = events.values_list("run_id", "event_type", "payload", "phase_before", "phase_after")
    for run_id, event_type, payload, phase_before, phase_after in rows.iterator():
        if event_type == "recovery.started":
            started[run_id] = (phase_before, phase_after)
        elif event_type == "recovery.succeeded":
            before, after = started.pop(run_id, (None, None))
            if after == FROZEN and before != FROZEN:
                failed += 1
                frozen += 1
            else:
                durations.append(float(payload.get("duration_seconds", 0.0)))
        elif event_type == "recovery.failed":
            started.pop(run_id, None)
            failed += 1
        else:
            audited += 1
            duplicates += int(payload.get("duplicates", 0))
    total = len(durations) + failed
    return RecoveryStats(
        recoveries=total,
        succeeded=len(durations),
        failed=failed,
        success_rate=(len(durations) / total) if total else None,
        duration_median_seconds=statistics.median(durations) if durations else None,
        duration_p95_seconds=_p95(sorted(durations)) if durations else None,
        duplicate_submissions=duplicates,
        audited_runs=audited,
        frozen=frozen,
    )
