"""The Prometheus exposition of the counters (DESIGN.md section 8.1).

:class:`CounterCollector` is a ``prometheus_client`` custom collector: each scrape reads the
counters table with one grouped ``SELECT`` (summing the time buckets) and the runs table with one
grouped ``SELECT`` (runs by phase, a gauge of the current state), never the trace. Every family
carries ``tenant`` and ``task`` labels.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from django.db.models import Count, Sum
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from runtime.models import MetricCounter, Run
from runtime.observability.collectors import collectors_extra
from runtime.observability.rules import DURATION_BUCKETS_SECONDS

PREFIX = "ratchet_"

COUNTERS = {
    "runs_started": "Runs created.",
    "recoveries_started": "Recoveries started (a worker took over a run whose worker died).",
    "recoveries_succeeded": "Recoveries followed by a completed write (or a completed/cancelled run).",
    "recoveries_failed": "Recoveries after which the run froze or failed before its next completed write.",
    "recoveries_frozen": "Failed recoveries decided by a freeze for review.",
    "duplicate_submissions": "Effects beyond the first per idempotency key, from the adapters' own records.",
    "audited_runs": "Runs whose effects were audited at completion.",
    "lease_takeovers": "Leases taken over from another worker.",
    "fencing_rejections": "Stale workers refused by a fence.",
    "review_cases_opened": "Review cases opened (runs frozen for a human).",
    "review_cases_resolved": "Review cases decided (replanned or aborted).",
    "approvals_requested": "Approvals requested.",
    "approvals_expired": "Approvals that expired before a decision.",
    "runs_blocked": ("Times a worker could not drive a run for want of its plug-in code (not a failed "
                     "recovery: install the plug-in and restart the workers)."),
}

_HISTOGRAM = "recovery_duration"
_LABELS = ["tenant", "task"]
_HISTOGRAM_HELP = "Duration of succeeded recoveries, in seconds."
_RUNS_HELP = "Runs by current phase."
_APPROVALS_HELP = "Runs waiting for an approval."


def _bucket_key(label: str) -> float:
    return float("inf") if label == "+Inf" else float(label)


class CounterCollector(Collector):
    """Yields the counter families, the recovery duration histogram and the runs-by-phase gauge."""

    def describe(self) -> Iterator[Metric]:
        """The same families as :meth:`collect`, without samples and without touching the database
        (``prometheus_client``'s describe protocol; the documentation's metrics reference is built
        from it)."""
        for name, help_text in COUNTERS.items():
            yield CounterMetricFamily(PREFIX + name, help_text, labels=_LABELS)
        yield HistogramMetricFamily(PREFIX + _HISTOGRAM + "_seconds", _HISTOGRAM_HELP, labels=_LABELS)
        yield GaugeMetricFamily(PREFIX + "runs", _RUNS_HELP, labels=[*_LABELS, "phase"])
        yield GaugeMetricFamily(PREFIX + "approvals_waiting", _APPROVALS_HELP, labels=_LABELS)

    def collect(self) -> Iterator[Metric]:
        cells: dict[str, dict[tuple[str, str], dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
        rows = (MetricCounter.objects.values("name", "tenant_id", "task_id", "label")
                .annotate(total=Sum("value")).order_by())
        for row in rows:
            cells[row["name"]][(row["tenant_id"], row["task_id"])][row["label"]] = float(row["total"] or 0.0)
        for name, help_text in COUNTERS.items():
            family = CounterMetricFamily(PREFIX + name, help_text, labels=_LABELS)
            for scope, labels in sorted(cells.get(name, {}).items()):
                family.add_metric(list(scope), labels.get("", 0.0))
            yield family
        yield self._histogram(cells)
        phases = GaugeMetricFamily(PREFIX + "runs", _RUNS_HELP, labels=[*_LABELS, "phase"])
        approvals = GaugeMetricFamily(PREFIX + "approvals_waiting", _APPROVALS_HELP, labels=_LABELS)
        for row in (Run.objects.values("tenant_id", "task_id", "phase").annotate(n=Count("run_id"))
                    .order_by("tenant_id", "task_id", "phase")):
            phases.add_metric([row["tenant_id"], row["task_id"], row["phase"]], row["n"])
            if row["phase"] == "awaiting_approval":
                approvals.add_metric([row["tenant_id"], row["task_id"]], row["n"])
        yield phases
        yield approvals

    @staticmethod
    def _histogram(cells: dict[str, dict[tuple[str, str], dict[str, float]]]) -> Metric:
        family = HistogramMetricFamily(PREFIX + _HISTOGRAM + "_seconds",
                                       _HISTOGRAM_HELP, labels=_LABELS)
        scopes = set(cells.get(_HISTOGRAM + "_bucket", {})) | set(cells.get(_HISTOGRAM + "_count", {}))
        for scope in sorted(scopes):
            per_bucket = cells.get(_HISTOGRAM + "_bucket", {}).get(scope, {})
            running, buckets = 0.0, []
            for bound in [*(f"{b:g}" for b in DURATION_BUCKETS_SECONDS), "+Inf"]:
                running += per_bucket.get(bound, 0.0)
                buckets.append((bound, running))
            total = cells.get(_HISTOGRAM + "_sum", {}).get(scope, {}).get("", 0.0)
            family.add_metric(list(scope), buckets, sum_value=total)
        return family


def metrics_exposition() -> bytes:
    """The Prometheus text exposition of every family (UTF-8 bytes), with those other apps
    registered (``runtime.observability.collectors``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CounterCollector())
    for collector in collectors_extra():
        registry.register(collector)
    return generate_latest(registry)
