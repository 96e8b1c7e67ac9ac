"""Dashboard pages at size: p50/p95 server time and query count per page (DESIGN.md section 6.8).

Seeds ``runs`` runs and ``runs * events_per_run`` trace events into the scratch database (filler
rows written in bulk: their hash chains are not real, which no page view checks any more; every
``RECOVERED_EVERY``-th run had a recovery, in its trace and in the counters; each has the content
search terms of one commit, as ``runtime.evidence.search_terms`` writes them), plus
a few real runs made by :func:`runtime.bench.trace.traced_run_create` with signed checkpoints, one of
them waiting for an approval and one frozen on a review case. Then each page is requested through
Django's test client as a superuser, ``samples`` times: the server time is the time of the whole
request inside this process (no network), the query count that of one request.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core import signals
from django.db import close_old_connections, connection, transaction
from django.test import Client

from runtime.bench.report import BenchReport, latency_metric
from runtime.bench.sizes import BenchSizes
from runtime.bench.trace import traced_run_create
from runtime.core.search_text import intent_terms
from runtime.errors import BenchmarkError
from runtime.models import (
    CaseStatus,
    IdempotencyRecord,
    MetricCounter,
    Phase,
    ReviewCase,
    Run,
    RunSearchTerm,
    TraceEvent,
)
from runtime.observability.metrics import metrics_bucket_start
from runtime.observability.rules import duration_bucket
from runtime.observability.stats import recovery_stats

FULL_RUNS = 100_000
QUICK_RUNS = 500
EVENTS_PER_RUN = 10
"""100k runs x 10 = 1M trace events: a size at which no page cost may grow with the number of
runs or events (DESIGN.md section 6.8)."""

_PHASES = [Phase.COMPLETED, Phase.COMPLETED, Phase.COMPLETED, Phase.FAILED, Phase.RUNNING,
           Phase.CANCELLED, Phase.PENDING]
_TYPES = ["lease.acquired", "intent.proposed", "write.executed", "checkpoint.committed",
          "lease.released"]


def _seed_filler(*, runs: int, events_per_run: int, say: Callable[[str], None]) -> None:
    """Bulk-insert ``runs`` runs (created over the last 100 days) and their trace events."""
    now = datetime.now(UTC)
    batch = 5_000
    for start in range(0, runs, batch):
        rows, events, counters, terms = [], [], [], []
        for i in range(start, min(runs, start + batch)):
            run_id = f"fill-{i:07d}-{uuid.uuid5(uuid.NAMESPACE_OID, str(i)).hex[:8]}"
            created = now - timedelta(days=100) + timedelta(seconds=i * 86.4)
            phase = _PHASES[i % len(_PHASES)]
            rows.append(Run(
                run_id=run_id, tenant_id=f"tenant-{i % 50}", task_id=f"task-{i % 200}",
                task_version="1", policy_id="policy", policy_version="1",
                environment_instance_id=f"env-{i % 1000}", scenario_fingerprint="sha256:" + "0" * 64,
                phase=phase.value, trace_seq=events_per_run, trace_head="sha256:" + "1" * 64,
                generation=1, created_at=created, updated_at=created,
            ))
            recovered = i % RECOVERED_EVERY == 0 and events_per_run >= 4
            for seq in range(1, events_per_run + 1):
                event_type, payload = _TYPES[seq % len(_TYPES)], {"n": seq}
                if recovered and seq in (2, 3):
                    # A recovery decided by the write that follows it (DESIGN.md section 8).
                    event_type = "recovery.started" if seq == 2 else "recovery.succeeded"
                    payload = {"n": seq, "duration_seconds": _duration(i)} if seq == 3 else payload
                elif recovered and seq == 4:
                    event_type = "write.executed"
                events.append(TraceEvent(
                    run_id=run_id, seq=seq, event_type=event_type,
                    payload=payload, environment_version=f"w{seq}",
                    prev_hash="sha256:" + "2" * 64, hash="sha256:" + "3" * 64,
                    created_at=created + timedelta(milliseconds=seq),
                ))
            terms.extend(RunSearchTerm(run_id=run_id, kind=kind, term=term)
                         for kind, term in intent_terms(_filler_intent(i)))
            if recovered:
                counters.extend(_recovery_counters(tenant_id=f"tenant-{i % 50}", task_id=f"task-{i % 200}",
                                                   at=created.timestamp(), seconds=_duration(i)))
        with transaction.atomic():
            Run.objects.bulk_create(rows, batch_size=1_000)
            TraceEvent.objects.bulk_create(events, batch_size=5_000)
            MetricCounter.objects.bulk_create(counters, batch_size=5_000)
            RunSearchTerm.objects.bulk_create(terms, batch_size=5_000)
        if (start // batch) % 4 == 0:
            say(f"pages: seeded {min(runs, start + batch)} of {runs} runs")


_VERBS = ["fix", "add", "remove", "rename", "refactor", "document", "test"]
_NOUNS = ["retry", "budget", "lease", "cache", "queue", "ledger", "receipt", "approval", "trace",
          "worker", "planner", "adapter", "gateway", "metric", "scope", "token", "digest", "bundle"]
_MODULES = ["runtime", "review", "engine", "adapters", "bench", "core", "planners", "static"]


def _filler_intent(i: int) -> dict[str, Any]:
    """The ``intent.proposed`` payload whose search terms filler run ``i`` gets (a git commit:
    ``runtime.core.search_text`` reads its key, kind, message and paths)."""
    noun, other = _NOUNS[i % len(_NOUNS)], _NOUNS[(i // 7) % len(_NOUNS)]
    module = _MODULES[i % len(_MODULES)]
    return {"idempotency_key": f"fill:{i:07d}:0", "action": {"kind": "commit", "target": "", "params": {
        "message": f"{_VERBS[i % len(_VERBS)]} {noun} {other} in {module} #{i}",
        "changes": [{"op": "write", "path": f"src/{module}/{noun}_{i % 997}.py"}]}}}


RECOVERED_EVERY = 10
"""Every this many filler runs had a recovery (trace events and the counters it moved)."""


def _duration(i: int) -> float:
    return round(0.05 + (i * 7919 % 1000) / 250.0, 3)


def _recovery_counters(*, tenant_id: str, task_id: str, at: float, seconds: float) -> list[MetricCounter]:
    """The counter cells one succeeded recovery moves (as ``runtime.observability.metrics`` writes them, one
    row per cell here: the filler's runs are in distinct minute buckets)."""
    bucket = metrics_bucket_start(at)
    cells = [("recoveries_started", "", 1.0), ("recoveries_succeeded", "", 1.0),
             ("recovery_duration_bucket", duration_bucket(seconds), 1.0),
             ("recovery_duration_sum", "", seconds), ("recovery_duration_count", "", 1.0),
             ("runs_started", "", 1.0)]
    return [MetricCounter(name=name, tenant_id=tenant_id, task_id=task_id, label=label, window_start=bucket,
                          value=value) for name, label, value in cells]


def _real_run(*, events: int, phase: Phase = Phase.PENDING) -> str:
    """A run with a signed checkpoint and ``events`` real (hash-chained) trace events."""
    run_id = traced_run_create(events=events, worker="bench-pages")
    if phase != Phase.PENDING:
        Run.objects.filter(run_id=run_id).update(phase=phase.value)
    return run_id


def _measure(client: Client, report: BenchReport, *, name: str, label: str, url: str,
             samples: int, headers: dict[str, str] | None = None, status: int = 200) -> None:
    response = client.get(url, headers=headers)  # warm caches (templates, content types)
    if response.status_code != status:
        raise BenchmarkError(f"page answered {response.status_code}", page=name)
    queries = [0]

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        queries[0] += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        client.get(url, headers=headers)
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        client.get(url, headers=headers)
        times.append(time.perf_counter() - started)
    report.metrics.append(latency_metric(f"page_{name}_ms", label, times))
    report.facts[f"page_{name}_queries"] = queries[0]


def _settle() -> None:
    """Bring the freshly bulk-loaded tables to the state a live database is in, which autovacuum
    keeps: planner statistics (``ANALYZE``) and, on PostgreSQL, the visibility map (``VACUUM``),
    without which every index-only scan visits the heap. Measured on just-loaded tables the pages
    would time a state no running installation stays in for more than a minute or two."""
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")


@contextmanager
def _persistent_connection() -> Iterator[None]:
    """Keep one database connection across the measured requests, as a server with
    ``CONN_MAX_AGE > 0`` does: the figures are the pages' own cost, not a connect per request."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def pages_measure(*, report: BenchReport, sizes: BenchSizes, runs: int | None = None,
                  events_per_run: int = EVENTS_PER_RUN,
                  say: Callable[[str], None] = lambda line: None) -> None:
    """Seed the dashboard's data and time each page (see the module docstring).

    Args:
        runs: filler runs; default ``FULL_RUNS`` (``QUICK_RUNS`` for a ``--quick`` bench, whose
            ``sizes.samples`` is at most 20).
        events_per_run: trace events per filler run.

    Raises:
        BenchmarkError: a page did not answer as expected.
    """
    quick = sizes.samples <= 20
    runs = runs if runs is not None else (QUICK_RUNS if quick else FULL_RUNS)
    # A --quick bench only shows that every page answers; its latencies are not judged.
    samples = 3 if quick else max(10, min(50, sizes.samples // 4))
    started = time.perf_counter()
    _seed_filler(runs=runs, events_per_run=events_per_run, say=say)
    report.facts["pages_seed_seconds"] = round(time.perf_counter() - started, 1)
    detail = _real_run(events=500)
    waiting = _real_run(events=20, phase=Phase.AWAITING_APPROVAL)
    frozen = _real_run(events=20, phase=Phase.NEEDS_REVIEW)
    ReviewCase.objects.create(case_id=f"open-{frozen[:8]}", run_id=frozen, status=CaseStatus.OPEN,
                              reason="receipt_conflict", environment={})
    # The page measured is a decided case: an open one also observes the run's environment
    # (``decision_prepare``), which these seeded runs do not have.
    case = ReviewCase.objects.create(case_id=f"done-{frozen[:8]}", run_id=frozen,
                                     status=CaseStatus.ABORTED, reason="receipt_conflict",
                                     environment={})
    _settle()
    report.facts["pages_runs"] = Run.objects.count()
    report.facts["pages_trace_events"] = runs * events_per_run + 540
    user = get_user_model().objects.create_superuser(username=f"bench-{uuid.uuid4().hex[:6]}",
                                                     password=uuid.uuid4().hex)
    client = Client()
    client.force_login(user)
    htmx = {"HX-Request": "true"}
    token_page = client.get(f"/runs/{detail}/").content.decode()
    since = token_page.split('"since": "', 1)[1].split('"', 1)[0] if '"since": "' in token_page else ""
    middle = Run.objects.order_by("-created_at", "-run_id").values_list("run_id", flat=True)[runs // 2]
    middle_tenant = Run.objects.order_by("tenant_id", "run_id").values_list("run_id", flat=True)[runs // 2]
    IdempotencyRecord.objects.bulk_create([
        IdempotencyRecord(run_id=run_id, idempotency_key=f"bench:key:{n:07d}", intent_digest="sha256:" + "0" * 64)
        for n, run_id in enumerate(Run.objects.order_by("run_id").values_list("run_id", flat=True)[:runs // 10])
    ], batch_size=5_000)
    key_prefix = "bench:key:00012"
    pages = [
        ("runs", "runs list, newest page", "/", 200, None),
        ("runs_deep", "runs list, a keyset page half-way down", f"/?after={middle}", 200, None),
        ("runs_phase", "runs list, filtered to a phase", "/?phase=failed", 200, None),
        ("runs_search", "runs list, partial run id", "/?q=fill-00500", 200, None),
        ("run_detail", "run detail (500 events)", f"/runs/{detail}/", 200, None),
        ("run_poll", "run detail poll, nothing changed", f"/runs/{detail}/?since={since}", 204, htmx),
        ("trace", "trace browser, newest page", "/trace/", 200, None),
        ("trace_type", "trace browser, one event type", "/trace/?event_type=intent.proposed", 200,
         None),
        ("trace_run", "trace browser, partial run id", f"/trace/?run={detail[:8]}", 200, None),
        ("approvals", "approvals queue", "/approvals/", 200, None),
        ("cases", "review cases list", "/cases/", 200, None),
        ("case_detail", "one review case (decided)", f"/cases/{case.case_id}/", 200, None),
        ("health", "health (counters, 24 h charts)", "/health/", 200, None),
        ("health_7d", "health (counters, 7 d charts)", "/health/?range=7d", 200, None),
        ("runs_sort_updated", "runs list, sorted by updated", "/?sort=-updated", 200, None),
        ("runs_sort_tenant", "runs list, sorted by tenant", "/?sort=tenant", 200, None),
        ("runs_sort_tenant_deep", "runs list, by tenant, a keyset page half-way down",
         f"/?sort=tenant&after={middle_tenant}", 200, None),
        ("runs_dates", "runs list, a created-date range",
         f"/?from={(datetime.now(UTC) - timedelta(days=50)).date()}"
         f"&to={(datetime.now(UTC) - timedelta(days=49)).date()}",
         200, None),
        ("runs_key", "runs list, idempotency-key prefix", f"/?key={key_prefix}", 200, None),
        ("workers", "workers and queues", "/workers/", 200, None),
        ("runs_content_key", "runs list, search: a key prefix (100 runs)", "/?q=fill:00123", 200, None),
        ("runs_content_path", "runs list, search: a file name start (about 60 runs)", "/?q=budget_17", 200, None),
        ("runs_content_words", "runs list, search: three message words", "/?q=budget+lease+review", 200, None),
        ("runs_content_common", "runs list, search: a word of most runs (capped)", "/?q=fix", 200, None),
        ("trace_content", "trace browser, search: a key prefix", "/trace/?q=fill:00123", 200, None),
        ("trace_content_words", "trace browser, search: message words", "/trace/?q=budget+lease+review",
         200, None),
        ("runs_bad_date", "runs list, a bad date (form error)", "/?from=notadate", 400, None),
    ]
    del waiting
    # The health page reads counters (DESIGN.md section 6.6); ``manage.py recovery_stats`` still
    # computes the same figures with a whole-trace scan: timed here on the same data, for the
    # comparison.
    say("pages: recovery_stats (the old health page's whole-trace computation)")
    scans = []
    for _ in range(max(3, samples // 5)):
        started = time.perf_counter()
        recovery_stats()
        scans.append(time.perf_counter() - started)
    report.metrics.append(latency_metric("recovery_stats_scan_ms", "recovery_stats() whole-trace scan", scans))
    with _persistent_connection():
        for name, label, url, status, headers in pages:
            say(f"pages: {label}")
            _measure(client, report, name=name, label=f"page: {label}", url=url,
                     samples=samples, headers=headers, status=status)
