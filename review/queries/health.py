"""The health page: rollout metrics read from the counters, charts over time, run counts
(DESIGN.md sections 6.6 and 8.1).

Every figure comes from the ``MetricCounter`` table that ``runtime.observability.metrics`` keeps as trace events
commit, summed over its time buckets: the page never reads the trace. ``manage.py recovery_stats``
(``runtime.observability.stats``, the whole-trace computation) stays the audit the page is tested against.
Recovery duration quantiles come from the histogram, so the page gives the bucket range that
holds the exact median and p95, not a made-up point.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.core.cache import cache
from django.db.models import Count, F, Q, QuerySet, Sum, Value
from django.db.models.functions import Now

from review.queries.runs import LIVE_PHASES
from review.scope import AllTenants, scope_filter, scope_tenants
from runtime.models import CaseStatus, MetricCounter, Phase, ReviewCase, Run
from runtime.observability.metrics import metrics_bucket_start
from runtime.observability.rules import DURATION_BUCKETS_SECONDS

RANGES: dict[str, tuple[int, int]] = {"24h": (24 * 3600, 900), "7d": (7 * 24 * 3600, 3600)}
"""Chart range name -> (span seconds, slot seconds): 96 slots of 15 min, or 168 slots of 1 h."""
DEFAULT_RANGE = "24h"

_TOTALS = ("recoveries_started", "recoveries_succeeded", "recoveries_failed", "recoveries_frozen",
           "recovery_duration_bucket", "recovery_duration_sum", "recovery_duration_count",
           "duplicate_submissions", "audited_runs", "approvals_requested", "approvals_expired",
           "review_cases_opened", "review_cases_resolved", "lease_takeovers", "fencing_rejections")
_SERIES = ("recoveries_succeeded", "recoveries_failed", "recovery_duration_bucket",
           "recovery_duration_sum", "recovery_duration_count", "duplicate_submissions",
           "approvals_requested", "approvals_expired")
_BOUNDS = [*(f"{b:g}" for b in DURATION_BUCKETS_SECONDS), "+Inf"]


@dataclass(frozen=True)
class QuantileRange:
    """Where a quantile of the recovery durations lies: ``low < q <= high`` seconds (``low`` 0
    for the first bucket, ``high`` ``inf`` beyond the last bound)."""

    low: float
    high: float

    @property
    def label(self) -> str:
        if math.isinf(self.high):
            return f"> {self.low:g} s"
        if self.low == 0:
            return f"≤ {self.high:g} s"
        return f"{self.low:g}–{self.high:g} s"

    def holds(self, seconds: float) -> bool:
        """Whether ``seconds`` lies in this range (bounds as the histogram counts them)."""
        return (self.low < seconds or (self.low == 0 and seconds >= 0)) and seconds <= self.high


def _rank_bucket(cumulative: list[tuple[float, float]], rank: int) -> tuple[float, float]:
    """``(low, high)`` of the bucket holding the ``rank``-th (0-based) smallest duration."""
    low = 0.0
    for high, running in cumulative:
        if running > rank:
            return low, high
        low = high
    return low, math.inf


def histogram_quantile(per_bucket: dict[str, float], q: float) -> QuantileRange | None:
    """The range holding quantile ``q`` (0..1) of the durations counted in ``per_bucket``
    (``le`` label -> count), or None when nothing was counted.

    Matches ``statistics.quantiles(method="inclusive")`` (and ``statistics.median``) of
    ``runtime.observability.stats``: the exact quantile interpolates between the values of ranks
    ``floor(h)`` and ``ceil(h)``, ``h = q * (n - 1)``, so it lies between the lower bound of the
    first one's bucket and the upper bound of the second one's.
    """
    running, cumulative = 0.0, []
    for label in _BOUNDS:
        running += per_bucket.get(label, 0.0)
        cumulative.append((math.inf if label == "+Inf" else float(label), running))
    n = int(round(running))
    if n <= 0:
        return None
    h = q * (n - 1)
    low, _ = _rank_bucket(cumulative, math.floor(h))
    _, high = _rank_bucket(cumulative, math.ceil(h))
    return QuantileRange(low=low, high=high)


@dataclass(frozen=True)
class CounterTotals:
    """The rollout metrics summed over every counter bucket (DESIGN.md section 8.1).

    ``recoveries`` are the decided ones (succeeded + failed); ``open`` = started - decided.
    ``duration_p50`` / ``duration_p95``: histogram ranges (None without a timed recovery);
    ``duration_mean_seconds``: exact (sum / count).
    """

    recoveries: int
    succeeded: int
    failed: int
    frozen: int
    open: int
    success_rate: float | None
    duration_p50: QuantileRange | None
    duration_p95: QuantileRange | None
    duration_mean_seconds: float | None
    duplicate_submissions: int
    audited_runs: int
    approvals_requested: int
    approvals_expired: int
    review_cases_opened: int
    lease_takeovers: int
    fencing_rejections: int


def _totals(cells: dict[tuple[str, str], float]) -> CounterTotals:
    def total(name: str) -> int:
        return int(round(cells.get((name, ""), 0.0)))

    succeeded, failed = total("recoveries_succeeded"), total("recoveries_failed")
    decided = succeeded + failed
    buckets = {label: value for (name, label), value in cells.items()
               if name == "recovery_duration_bucket"}
    count = cells.get(("recovery_duration_count", ""), 0.0)
    return CounterTotals(
        recoveries=decided, succeeded=succeeded, failed=failed, frozen=total("recoveries_frozen"),
        open=max(0, total("recoveries_started") - decided),
        success_rate=(succeeded / decided) if decided else None,
        duration_p50=histogram_quantile(buckets, 0.5),
        duration_p95=histogram_quantile(buckets, 0.95),
        duration_mean_seconds=(cells.get(("recovery_duration_sum", ""), 0.0) / count) if count else None,
        duplicate_submissions=total("duplicate_submissions"), audited_runs=total("audited_runs"),
        approvals_requested=total("approvals_requested"), approvals_expired=total("approvals_expired"),
        review_cases_opened=total("review_cases_opened"), lease_takeovers=total("lease_takeovers"),
        fencing_rejections=total("fencing_rejections"),
    )


def _counters(user: Any) -> QuerySet[MetricCounter]:
    cells = MetricCounter.objects.all()
    return cells if user is None else scope_filter(user=user, queryset=cells)


def counter_totals(*, user: Any) -> CounterTotals:
    """:class:`CounterTotals` over every task and time bucket of the tenants ``user`` may see
    (``None``: every tenant; one grouped query)."""
    rows = (_counters(user).filter(name__in=_TOTALS).values("name", "label")
            .annotate(total=Sum("value")).order_by())
    return _totals({(r["name"], r["label"]): float(r["total"] or 0.0) for r in rows})


@dataclass(frozen=True)
class Slot:
    """One chart slot: ``start`` (unix seconds) and what the counters say about it.

    ``success_rate`` in [0, 1] or None (nothing decided); ``duration_mean_seconds`` and
    ``duration_p95_high`` (upper bound of the p95's histogram bucket) None without a timed
    recovery; the rest are counts in the slot.
    """

    start: int
    succeeded: int = 0
    failed: int = 0
    success_rate: float | None = None
    duration_mean_seconds: float | None = None
    duration_p95_high: float | None = None
    duplicates: int = 0
    approvals_requested: int = 0
    approvals_expired: int = 0

    @property
    def label(self) -> str:
        """The slot's start as ``YYYY-MM-DD HH:MM`` UTC."""
        return datetime.fromtimestamp(self.start, UTC).strftime("%Y-%m-%d %H:%M")


@dataclass(frozen=True)
class Series:
    """The chart data of one range: ``slots`` oldest first, ``slot_seconds`` wide."""

    range_name: str
    slot_seconds: int
    slots: list[Slot] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """Columns for the page's ``data-series`` attribute (drawn by ``static/review/charts.js``)."""
        def p95(s: Slot) -> float | None:
            return None if s.duration_p95_high is None or math.isinf(s.duration_p95_high) else s.duration_p95_high

        return {
            "range": self.range_name, "slot_seconds": self.slot_seconds,
            "t": [s.start for s in self.slots],
            "success_rate": [None if s.success_rate is None else round(100 * s.success_rate, 2)
                             for s in self.slots],
            "duration_mean": [s.duration_mean_seconds for s in self.slots],
            "duration_p95": [p95(s) for s in self.slots],
            "duplicates": [s.duplicates for s in self.slots],
            "approvals_requested": [s.approvals_requested for s in self.slots],
            "approvals_expired": [s.approvals_expired for s in self.slots],
        }


def counter_series(*, user: Any, range_name: str = DEFAULT_RANGE, now: float | None = None) -> Series:
    """Per-slot counters over the last 24 h or 7 d (one grouped query over the counter buckets
    of the range; every slot is returned, empty ones with zeros).

    Args:
        range_name: a key of ``RANGES`` (anything else: ``DEFAULT_RANGE``).
        now: unix seconds (tests); default the current time.
        user: count only the tenants this dashboard user may see (``None``: every tenant).
    """
    if range_name not in RANGES:
        range_name = DEFAULT_RANGE
    span, width = RANGES[range_name]
    end = metrics_bucket_start(now) // width * width + width
    start = end - span
    rows = (_counters(user).filter(name__in=_SERIES, window_start__gte=start)
            .annotate(slot=F("window_start") / Value(width) * Value(width))
            .values("slot", "name", "label").annotate(total=Sum("value")).order_by())
    cells: dict[int, dict[tuple[str, str], float]] = defaultdict(dict)
    for row in rows:
        cells[int(row["slot"])][(row["name"], row["label"])] = float(row["total"] or 0.0)
    slots = []
    for slot_start in range(start, end, width):
        c = cells.get(slot_start, {})
        succeeded = int(round(c.get(("recoveries_succeeded", ""), 0.0)))
        failed = int(round(c.get(("recoveries_failed", ""), 0.0)))
        count = c.get(("recovery_duration_count", ""), 0.0)
        p95 = histogram_quantile({lb: v for (n, lb), v in c.items() if n == "recovery_duration_bucket"},
                                 0.95)
        slots.append(Slot(
            start=slot_start, succeeded=succeeded, failed=failed,
            success_rate=(succeeded / (succeeded + failed)) if succeeded + failed else None,
            duration_mean_seconds=(c.get(("recovery_duration_sum", ""), 0.0) / count) if count else None,
            duration_p95_high=p95.high if p95 else None,
            duplicates=int(round(c.get(("duplicate_submissions", ""), 0.0))),
            approvals_requested=int(round(c.get(("approvals_requested", ""), 0.0))),
            approvals_expired=int(round(c.get(("approvals_expired", ""), 0.0))),
        ))
    return Series(range_name=range_name, slot_seconds=width, slots=slots)


@dataclass(frozen=True)
class Health:
    """What the health page shows.

    Attributes:
        totals: the rollout metrics from the counters (:class:`CounterTotals`).
        series: the chart data of the chosen range (:class:`Series`).
        phases: ``(phase value, label, count)`` for every phase, in state-machine order.
        total_runs: all runs.
        unleased_live: runs in a live phase whose lease is absent or expired by the database
            clock: they are waiting for a worker to recover them.
        waiting_approvals: runs waiting for an approval now (the run rows, as ``/metrics``).
        open_cases: review cases open now.
    """

    totals: CounterTotals
    series: Series
    phases: list[tuple[str, str, int]]
    total_runs: int
    unleased_live: int
    waiting_approvals: int
    open_cases: int


def health_summary(*, user: Any, range_name: str = DEFAULT_RANGE) -> Health:
    """Compute :class:`Health` for the tenants ``user`` may see (DESIGN.md section 6.6; ``None``:
    every tenant): five queries whatever the number of runs and trace events (the counters'
    totals, the chart slots, runs by phase, unleased live runs, open cases)."""
    runs = Run.objects.all() if user is None else scope_filter(user=user, queryset=Run.objects.all())
    cases = ReviewCase.objects.filter(status=CaseStatus.OPEN)
    if user is not None:
        cases = scope_filter(user=user, queryset=cases, field="run__tenant_id")
    counts = dict(runs.order_by().values_list("phase").annotate(n=Count("pk")))
    unleased = (
        runs.filter(phase__in=sorted(LIVE_PHASES))
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=Now()))
        .count()
    )
    return Health(
        totals=counter_totals(user=user),
        series=counter_series(range_name=range_name, user=user),
        phases=[(p.value, p.label, counts.get(p.value, 0)) for p in Phase],
        total_runs=sum(counts.values()),
        unleased_live=unleased,
        waiting_approvals=counts.get(Phase.AWAITING_APPROVAL.value, 0),
        open_cases=cases.count(),
    )


HEALTH_SECONDS = 15
"""How long one computed :class:`Health` serves the page for the same tenant scope and range
(seconds): its run counts group every run and its totals sum every counter bucket, so they are
computed at most once per this many seconds however many people watch (DESIGN.md section 6.8)."""


def health_summary_cached(*, user: Any, range_name: str = DEFAULT_RANGE) -> Health:
    """:func:`health_summary` for ``user``'s tenant scope, reused for ``HEALTH_SECONDS`` by
    everyone with the same scope (the key is the scope, never the user, so no tenant's figures
    reach another scope)."""
    scope = scope_tenants(user=user)
    who = "all" if isinstance(scope, AllTenants) else ",".join(sorted(scope))
    key = "ratchet:health:" + hashlib.sha256(f"{range_name}|{who}".encode()).hexdigest()[:32]
    found = cache.get(key)
    if found is None:
        found = health_summary(user=user, range_name=range_name)
        cache.set(key, found, HEALTH_SECONDS)
    return found
