"""Counters kept as trace events happen (DESIGN.md section 8.1).

:func:`metrics_events_count` is called by ``runtime.evidence.trace`` inside the transaction that appends
the events (``trace_append_txn``, and the checkpoint commit's trace rows), so a counter moves
exactly when its event commits and rolls back with it. Increments are one ``INSERT ... ON
CONFLICT DO UPDATE`` per batch that counts anything; most commits count nothing and cost no
statement. What is counted, per tenant and task, in time buckets of
``RATCHET_METRICS_BUCKET_SECONDS`` (totals sum the buckets; the admission gate sums a window):

* ``runs_started`` (``run.started``); ``lease_takeovers`` (``lease.acquired`` from another owner);
* ``recoveries_started``, ``recoveries_succeeded``, ``recoveries_failed``, ``recoveries_frozen``
  as ``runtime.observability.rules`` decides them; ``recovery_duration_seconds`` as a histogram
  (``recovery_duration_bucket`` per ``le``, ``..._sum``, ``..._count``) of succeeded recoveries;
* ``duplicate_submissions`` and ``audited_runs`` (``audit.effects``);
* ``review_cases_opened`` (``review.opened``), ``review_cases_resolved`` (``review.replanned``,
  ``review.aborted``); ``approvals_requested``, ``approvals_expired``;
* ``fencing_rejections``: :func:`metrics_fencing_rejection_count`, in its own transaction (a
  refused stale worker appends no event: it no longer owns the run).

A recovery's outcome is decided by a later event, possibly in another process: the open
recoveries of a run live in a ``RecoveryWatch`` row, and a process learns that a run it drives
has one when it appends ``recovery.started`` or takes the run's lease (``lease.acquired``), so
plain commits never read the table.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db import connections, router, transaction

from runtime.models import MetricCounter, RecoveryWatch, Run
from runtime.observability.rules import FAILED, FROZEN, SUCCEEDED, duration_bucket, recovery_decision

_LABELS: dict[str, tuple[str, str]] = {}
"""run id -> (tenant, task), as this process last read them from the run row."""
_WATCHED: set[str] = set()
"""Runs this process knows to have (had) an open recovery: only their commits are checked."""
_AWAITING: set[str] = set()
"""Runs whose ``recovery.started`` this process appended and whose own outcome event it has not
(the engine appends both in one process): an outcome event without one decides itself."""

_SIMPLE = {
    "run.started": "runs_started",
    "review.opened": "review_cases_opened",
    "review.replanned": "review_cases_resolved",
    "review.aborted": "review_cases_resolved",
    "approval.requested": "approvals_requested",
    "approval.expired": "approvals_expired",
    "run.blocked": "runs_blocked",
}

Increments = Counter
"""``(name, label) -> amount`` for one run's tenant and task."""


def metrics_bucket_start(at: float | None = None) -> int:
    """Start (unix seconds) of the counter bucket holding ``at`` (default: now)."""
    width = max(1, int(getattr(settings, "RATCHET_METRICS_BUCKET_SECONDS", 60)))
    now = time.time() if at is None else at
    return int(now) // width * width


def metrics_labels_remember(run_id: str, tenant_id: str, task_id: str) -> None:
    """Cache a run's tenant and task (they never change), so commits need not read them."""
    _LABELS[run_id] = (tenant_id, task_id)


def _labels(run_id: str) -> tuple[str, str]:
    found = _LABELS.get(run_id)
    if found is None:
        row = Run.objects.filter(run_id=run_id).values_list("tenant_id", "task_id").first()
        found = row if row is not None else ("", "")
        _LABELS[run_id] = found
    return found


def _upsert(*, tenant_id: str, task_id: str, increments: Mapping[tuple[str, str], float]) -> None:
    """Add ``increments`` to the current bucket's cells in one statement."""
    cells = [(name, label, amount) for (name, label), amount in increments.items()]
    if not cells:
        return
    alias = router.db_for_write(MetricCounter)
    connection = connections[alias]
    table = connection.ops.quote_name(MetricCounter._meta.db_table)
    bucket = metrics_bucket_start()
    values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(cells))
    params: list[Any] = []
    for name, label, amount in cells:
        params.extend([name, tenant_id, task_id, label, bucket, float(amount)])
    sql = (f"INSERT INTO {table} (name, tenant_id, task_id, label, window_start, value) VALUES {values} "
           f"ON CONFLICT (name, tenant_id, task_id, label, window_start) "
           f"DO UPDATE SET value = {table}.value + excluded.value")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _decide(watch: RecoveryWatch, decision: str, *, froze: bool, incs: Increments) -> None:
    if decision == SUCCEEDED:
        incs[("recoveries_succeeded", "")] += watch.open
        for seconds in watch.durations:
            if seconds is None:
                continue  # killed before it traced its own success: succeeded, untimed
            incs[("recovery_duration_bucket", duration_bucket(float(seconds)))] += 1
            incs[("recovery_duration_sum", "")] += float(seconds)
            incs[("recovery_duration_count", "")] += 1
    else:
        incs[("recoveries_failed", "")] += watch.open
        if froze:
            incs[("recoveries_frozen", "")] += watch.open
    watch.open = 0
    watch.durations = []


def metrics_events_count(*, run_id: str, events: Sequence[tuple[str, Mapping[str, Any]]],
                         phase_before: str | None = None) -> None:
    """Count ``events`` of ``run_id``; call inside the transaction that appends them.

    Args:
        run_id: the run the events belong to.
        events: ``(event_type, payload)`` pairs in ``seq`` order.
        phase_before: the run row's phase when the events were appended (known to
            ``trace_append_txn``; needed for ``recovery.started`` only).
    """
    incs: Increments = Counter()
    watch: RecoveryWatch | None = None
    watch_loaded = dirty = False
    for event_type, payload in events:
        name = _SIMPLE.get(event_type)
        if name is not None:
            incs[(name, "")] += 1
        if event_type == "lease.acquired":
            previous = payload.get("previous_owner")
            if previous and previous != payload.get("worker"):
                incs[("lease_takeovers", "")] += 1
            # A lease is where a process starts driving a run: learn whether it has open recoveries.
            watch, watch_loaded = RecoveryWatch.objects.filter(run_id=run_id).first(), True
            (_WATCHED.add if watch is not None else _WATCHED.discard)(run_id)
        elif event_type == "audit.effects":
            incs[("audited_runs", "")] += 1
            incs[("duplicate_submissions", "")] += int(payload.get("duplicates", 0) or 0)
        if run_id not in _WATCHED and not event_type.startswith("recovery."):
            continue
        if not watch_loaded:
            watch, watch_loaded = RecoveryWatch.objects.filter(run_id=run_id).first(), True
        if event_type == "recovery.started":
            if watch is None:
                tenant_id, task_id = _labels(run_id)
                watch = RecoveryWatch(run_id=run_id, tenant_id=tenant_id, task_id=task_id)
            watch.open += 1
            watch.durations = [*watch.durations, None]
            watch.nothing_to_recover = phase_before == FROZEN
            incs[("recoveries_started", "")] += 1
            _WATCHED.add(run_id)
            _AWAITING.add(run_id)
            dirty = True
            continue
        own_start = run_id in _AWAITING
        if event_type in ("recovery.succeeded", "recovery.failed"):
            _AWAITING.discard(run_id)
        if watch is None or watch.open == 0:
            if event_type in ("recovery.succeeded", "recovery.failed") and not own_start:
                # No recovery.started before it: the event decides its own recovery (runtime.observability.stats).
                lone = RecoveryWatch(run_id=run_id, open=1, durations=[payload.get("duration_seconds")])
                _decide(lone, SUCCEEDED if event_type == "recovery.succeeded" else FAILED, froze=False,
                        incs=incs)
            continue
        decision = recovery_decision(event_type, payload)
        if event_type == "recovery.succeeded":
            watch.durations = [*watch.durations[:-1], float(payload.get("duration_seconds", 0.0))]
            dirty = True
            if watch.nothing_to_recover:
                decision = SUCCEEDED
        if decision is not None:
            froze = event_type == "checkpoint.committed" and payload.get("phase") == FROZEN
            _decide(watch, decision, froze=froze, incs=incs)
            dirty = True
        if event_type == "checkpoint.committed":
            watch.nothing_to_recover = False
    if watch is not None and dirty:
        _watch_store(watch)
    if incs:
        tenant_id, task_id = _labels(run_id)
        _upsert(tenant_id=tenant_id, task_id=task_id, increments=incs)


def _watch_store(watch: RecoveryWatch) -> None:
    if watch.open:
        watch.save(force_insert=watch._state.adding)
        return
    if not watch._state.adding:
        RecoveryWatch.objects.filter(run_id=watch.run_id).delete()
    _WATCHED.discard(watch.run_id)


def metrics_fencing_rejection_count(*, run_id: str) -> None:
    """Count one stale worker refused by a fence (its own transaction: the refused worker
    appends no trace event). Call where ``LeaseLostError`` or ``FencingTokenError`` is caught.
    """
    with transaction.atomic():
        tenant_id, task_id = _labels(run_id)
        _upsert(tenant_id=tenant_id, task_id=task_id, increments={("fencing_rejections", ""): 1})
