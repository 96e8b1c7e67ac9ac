"""Trace verification time per 1,000 events (DESIGN.md section 8)."""

from __future__ import annotations

import time

from django.db import transaction

from runtime.bench.report import BenchReport, latency_metric
from runtime.bench.sizes import BenchSizes
from runtime.bench.state import realistic_state, realistic_write
from runtime.checkpoints.protocol import run_create
from runtime.errors import BenchmarkError
from runtime.evidence.trace import trace_append_txn, trace_verify
from runtime.models import Run


def traced_run_create(*, events: int, worker: str) -> str:
    """A new run with a signed checkpoint and ``events`` real (hash-chained) ``write.executed``
    trace events, leased to ``worker`` for an hour; returns its run id.

    The events are appended in batches of 500 under the run row lock: how they got there does
    not change what reading or verifying them costs, and single appends would make the setup
    dominate the benchmarks that use it (trace verification, the dashboard pages).
    """
    state = realistic_state(executed=0)
    run_create(state=state, worker=worker, ttl_seconds=3600.0)
    run_id = state.identity.run_id
    write = realistic_write(run_id=run_id, cursor=0)
    # The payload the engine writes: the receipt named, not copied (DESIGN.md section 4.14).
    named = {"idempotency_key": write.idempotency_key, "intent_digest": write.intent_digest,
             "receipt_id": write.receipt.receipt_id, "adapter_version": write.receipt.adapter_version,
             "receipt_fingerprint": write.receipt_fingerprint}
    version = write.receipt.environment_version_after
    left, seq = events, 0
    while left > 0:
        with transaction.atomic():
            Run.objects.select_for_update().filter(run_id=run_id).exists()
            for _ in range(min(500, left)):
                seq += 1
                trace_append_txn(run_id=run_id, event_type="write.executed", payload={"n": seq, **named},
                                 environment_version=version)
                left -= 1
    return run_id


def trace_measure(*, report: BenchReport, sizes: BenchSizes) -> None:
    """Append ``sizes.trace_events`` events to a new run's trace, then time ``trace_verify`` of
    it at least three times; append the time per 1,000 events to ``report``.

    Raises:
        BenchmarkError: the chain does not verify.
    """
    run_id = traced_run_create(events=sizes.trace_events, worker="bench-trace")
    per_thousand: list[float] = []
    for _ in range(max(3, sizes.repeat)):
        started = time.perf_counter()
        chain = trace_verify(run_id=run_id)
        elapsed = time.perf_counter() - started
        if not chain.ok:
            raise BenchmarkError(f"the trace does not verify: {chain.reason}", run_id=run_id)
        per_thousand.append(elapsed / chain.count * 1000.0)
    report.metrics.append(latency_metric("trace_verify_ms_per_1000_events",
                                         "trace verify, per 1,000 events", per_thousand))
