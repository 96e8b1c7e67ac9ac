"""Recovery metrics computed from stored trace events (DESIGN.md section 8).

* recovery success rate = recovery.succeeded / (recovery.succeeded + recovery.failed)
* recovery duration     = median and p95 of ``duration_seconds`` of succeeded recoveries (seconds)
* duplicate submissions = sum of ``duplicates`` in ``audit.effects`` events (effects beyond the
  first per idempotency key, counted in the adapter's own records when a run completes)
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from runtime.models import TraceEvent


@dataclass(frozen=True)
class RecoveryStats:
    """Recovery metrics. Durations in seconds; ``success_rate`` in [0, 1] or None without recoveries."""

    recoveries: int
    succeeded: int
    failed: int
    success_rate: float | None
    duration_median_seconds: float | None
    duration_p95_seconds: float | None
    duplicate_submissions: int
    audited_runs: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _p95(values: list[float]) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[94]


def recovery_stats(*, run_ids: list[str] | None = None) -> RecoveryStats:
    """Compute :class:`RecoveryStats` over all runs, or over ``run_ids``."""
    events = TraceEvent.objects.filter(
        event_type__in=("recovery.succeeded", "recovery.failed", "audit.effects")
    )
    if run_ids is not None:
        events = events.filter(run_id__in=run_ids)
    durations: list[float] = []
    failed = 0
    duplicates = 0
    audited = 0
    for event_type, payload in events.values_list("event_type", "payload").iterator():
        if event_type == "recovery.succeeded":
            durations.append(float(payload.get("duration_seconds", 0.0)))
        elif event_type == "recovery.failed":
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
    )
