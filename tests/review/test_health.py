"""Health page: recovery success rate, recovery duration, duplicates, approvals and cases read
from the counters (DESIGN.md sections 6.6 and 8.1), never from the trace."""

from __future__ import annotations

import html
import json
import math
import random
import re
import statistics

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from review.queries.health import counter_series, health_summary, histogram_quantile
from runtime.models import CaseStatus, MetricCounter, Phase, ReviewCase, TraceEvent
from runtime.observability.metrics import metrics_bucket_start, metrics_events_count
from runtime.observability.rules import duration_bucket
from runtime.observability.stats import recovery_stats
from tests.review.rows import add_events, build_run


def _traced(run, event_type: str, payload: dict) -> None:  # type: ignore[no-untyped-def]
    """Append one event and count it, as ``trace_append_txn`` does in its transaction."""
    with transaction.atomic():
        add_events(run, 1, event_type=event_type, payload=payload)
        metrics_events_count(run_id=run.run_id, events=[(event_type, payload)])


def test_it_shows_recovery_rate_duration_and_duplicates_from_the_counters(
    client_for, checkpoint_keyring, personas
) -> None:
    run = build_run(checkpoint_keyring, run_id="run-a", events=0)
    for seconds in (1.0, 2.0, 3.0):
        _traced(run, "recovery.succeeded", {"duration_seconds": seconds})
    _traced(run, "recovery.failed", {"error": "lease held"})
    _traced(run, "audit.effects", {"duplicates": 2})
    page = client_for("reviewer").get(reverse("review:health")).content.decode()
    assert "75.0 %" in page and "3 succeeded, 1 failed of 4 recoveries" in page
    assert 'data-quantile="p50">1–2.5 s<' in page, "the median's histogram bucket"
    assert 'data-quantile="p95">1–5 s<' in page, "between the 2nd and 3rd durations' buckets"
    assert "mean 2.00 s" in page
    assert 'metric-value metric-bad">2<' in page and "one key, more than one effect" in page
    stats = recovery_stats()
    assert (stats.succeeded, stats.failed, stats.duplicate_submissions) == (3, 1, 2)


def test_it_reads_no_trace_and_a_fixed_number_of_queries(client_for, checkpoint_keyring, personas) -> None:
    run = build_run(checkpoint_keyring, run_id="run-q", events=0)
    client = client_for("operator")

    def summary_queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            health_summary(range_name="7d", user=None)
        return len(ctx.captured_queries)

    few = summary_queries()
    for seconds in (0.2, 0.7, 4.0, 40.0):
        _traced(run, "recovery.succeeded", {"duration_seconds": seconds})
    add_events(run, 200)
    assert few == summary_queries() == 5
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(reverse("review:health")).status_code == 200
    table = TraceEvent._meta.db_table
    assert not [q["sql"] for q in ctx.captured_queries if table in q["sql"]], "the page never reads the trace"


def test_it_shows_waiting_approvals_and_open_cases(client_for, checkpoint_keyring, personas) -> None:
    build_run(checkpoint_keyring, run_id="run-wait", phase=Phase.AWAITING_APPROVAL.value)
    frozen = build_run(checkpoint_keyring, run_id="run-frozen", phase=Phase.NEEDS_REVIEW.value)
    ReviewCase.objects.create(case_id="case-open", run=frozen, status=CaseStatus.OPEN, reason="receipt_conflict")
    page = client_for("admin").get(reverse("review:health")).content.decode()
    approvals = re.search(r"<h2>Approvals</h2>\s*<p class=\"metric-value\">(\d+)<", page)
    cases = re.search(r"<h2>Open review cases</h2>\s*<p class=\"metric-value\">(\d+)<", page)
    assert (approvals.group(1), cases.group(1)) == ("1", "1")


def test_it_counts_runs_by_phase_and_live_runs_nobody_holds(
    client_for, checkpoint_keyring, personas
) -> None:
    build_run(checkpoint_keyring, run_id="run-held", phase=Phase.RUNNING.value, owner_worker="w1")
    build_run(checkpoint_keyring, run_id="run-orphaned", phase=Phase.RUNNING.value)
    build_run(checkpoint_keyring, run_id="run-expired", phase=Phase.PENDING.value, owner_worker="w2",
              lease_seconds=-60)
    build_run(checkpoint_keyring, run_id="run-done", phase=Phase.COMPLETED.value, stop_reason="verified")
    page = client_for("operator").get(reverse("review:health")).content.decode()
    assert "4 runs in total" in page
    assert "2 running or pending runs without a current lease" in page


def test_it_shows_dashes_before_any_recovery(client_for, personas) -> None:
    page = client_for("admin").get(reverse("review:health")).content.decode()
    assert "0 succeeded, 0 failed of 0 recoveries" in page
    assert ">exactly once<" in page


def _series(page: str) -> dict:
    return json.loads(html.unescape(re.search(r'data-series="([^"]*)"', page).group(1)))


def test_it_hands_the_charts_their_data_as_json_and_as_a_table(client_for, checkpoint_keyring, personas) -> None:
    run = build_run(checkpoint_keyring, run_id="run-c", events=0)
    _traced(run, "recovery.succeeded", {"duration_seconds": 0.3})
    _traced(run, "approval.requested", {})
    client = client_for("operator")
    page = client.get(reverse("review:health")).content.decode()
    data = _series(page)
    assert (data["range"], data["slot_seconds"], len(data["t"])) == ("24h", 900, 96)
    assert data["success_rate"][-1] == 100.0 and data["duration_p95"][-1] == 0.5
    assert data["approvals_requested"][-1] == 1
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", page) == [], "no inline script (CSP)"
    assert 'src="/static/review/uplot.min.js"' in page and 'src="/static/review/charts.js"' in page
    table = page.split('<details class="chart-table">', 1)[1].split("</details>", 1)[0]
    assert table.count("<tr><th scope=\"row\">") == 1, "one slot with activity"
    week = _series(client.get(reverse("review:health") + "?range=7d").content.decode())
    assert (week["range"], week["slot_seconds"], len(week["t"])) == ("7d", 3600, 168)


def test_it_puts_counter_buckets_into_their_chart_slots(db) -> None:
    now = 1_800_000_000.0
    bucket = metrics_bucket_start(now)
    for start, value in ((bucket, 2.0), (bucket - 60, 1.0), (bucket - 25 * 3600, 7.0)):
        MetricCounter.objects.create(name="duplicate_submissions", tenant_id="t", task_id="k", label="",
                                     window_start=start, value=value)
    series = counter_series(range_name="24h", now=now, user=None)
    assert sum(s.duplicates for s in series.slots) == 3, "the bucket 25 h ago is outside the range"
    assert series.slots[-1].start <= bucket < series.slots[-1].start + 900


def test_its_quantile_range_holds_what_recovery_stats_computes() -> None:
    rng = random.Random(15)
    for n in (1, 2, 3, 7, 20, 101):
        for _ in range(30):
            durations = sorted(rng.choice([rng.uniform(0, 0.3), rng.uniform(0.3, 12), rng.uniform(50, 400)])
                               for _ in range(n))
            buckets: dict[str, float] = {}
            for d in durations:
                buckets[duration_bucket(d)] = buckets.get(duration_bucket(d), 0) + 1
            median = statistics.median(durations)
            p95 = durations[0] if n == 1 else statistics.quantiles(durations, n=100, method="inclusive")[94]
            assert histogram_quantile(buckets, 0.5).holds(median), (durations, median)
            assert histogram_quantile(buckets, 0.95).holds(p95), (durations, p95)
    assert histogram_quantile({}, 0.5) is None
    assert math.isinf(histogram_quantile({"+Inf": 1.0}, 0.95).high)
