"""The health page: operator metrics (DESIGN.md section 8) and run counts."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q
from django.db.models.functions import Now

from review.queries.runs import LIVE_PHASES
from runtime.models import Phase, Run
from runtime.stats import RecoveryStats, recovery_stats


@dataclass(frozen=True)
class Health:
    """Operator metrics (DESIGN.md section 8) and run counts.

    Attributes:
        stats: recovery success rate, recovery duration (seconds), duplicate submissions.
        phases: ``(phase value, label, count)`` for every phase, in state-machine order.
        total_runs: all runs.
        unleased_live: runs in a live phase whose lease is absent or expired by the database
            clock: they are waiting for a worker to recover them.
    """

    stats: RecoveryStats
    phases: list[tuple[str, str, int]]
    total_runs: int
    unleased_live: int


def health_summary() -> Health:
    """Compute :class:`Health` (three queries, whatever the number of runs and events)."""
    counts = dict(Run.objects.order_by().values_list("phase").annotate(n=Count("pk")))
    unleased = (
        Run.objects.filter(phase__in=sorted(LIVE_PHASES))
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=Now()))
        .count()
    )
    return Health(
        stats=recovery_stats(),
        phases=[(p.value, p.label, counts.get(p.value, 0)) for p in Phase],
        total_runs=sum(counts.values()),
        unleased_live=unleased,
    )
