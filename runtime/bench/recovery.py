"""Recovery: resume after a SIGKILL between a write reaching git and anything recording it
(DESIGN.md section 5, the crash-window table), timed until the run completes."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from django.conf import settings
from django.db.models.functions import Now

from runtime.bench.children import child_env, manage_argv
from runtime.bench.report import BenchReport, latency_metric
from runtime.bench.sizes import BenchSizes
from runtime.core.checkpoint import Phase
from runtime.engine import run_advance
from runtime.errors import BenchmarkError
from runtime.models import Run, TraceEvent

CRASH_LEASE_SECONDS = 2.0
"""Lease time to live (seconds) of the child that is SIGKILLed in the recovery section: short,
so the resume does not wait long, but long enough that a step on a loaded machine renews it."""


def _wait_lease_expired(run_id: str, *, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not Run.objects.filter(run_id=run_id, lease_expires_at__lt=Now()).exists():
        if time.monotonic() > deadline:
            raise BenchmarkError("the killed child's lease did not expire", run_id=run_id)
        time.sleep(0.02)


def recovery_measure(*, report: BenchReport, sizes: BenchSizes, task: Path) -> None:
    """``sizes.repeat`` times: a child ``manage.py run`` of ``task`` (a replay of
    ``sizes.recovery_commits`` commits) SIGKILLs itself after its
    last write executed; once its lease expired, time ``run_advance`` until the run completes.
    Append the recovery latency and its restore share (from the trace) to ``report``.

    Raises:
        BenchmarkError: the child did not die at its crash point, its lease did not expire, the
            resumed run did not complete as recovered, or its audit is not exactly once.
    """
    total: list[float] = []
    restore: list[float] = []
    for _ in range(sizes.repeat):
        proc = subprocess.run(
            manage_argv("run", str(task), "--no-progress"),
            env=child_env(RATCHET_CRASH_AT=f"engine.after_execute:{sizes.recovery_commits}",
                          RATCHET_LEASE_SECONDS=str(CRASH_LEASE_SECONDS)),
            cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=3600, check=False,
        )
        first = (proc.stdout.splitlines() or [""])[0].split()
        if proc.returncode != -signal.SIGKILL or len(first) != 2 or first[0] != "run":
            tail = proc.stderr.strip().splitlines()[-1:]
            raise BenchmarkError(f"the crashing child did not die at its crash point: "
                                 f"{tail[0] if tail else ''}"[:500], exit_code=proc.returncode)
        run_id = first[1]
        _wait_lease_expired(run_id)
        started = time.perf_counter()
        outcome = run_advance(run_id=run_id, worker="bench-recovery", wait_seconds=5.0)
        total.append(time.perf_counter() - started)
        if outcome.phase != Phase.COMPLETED or not outcome.recovered:
            raise BenchmarkError(f"the resumed run ended in {outcome.phase}, "
                                 f"recovered={outcome.recovered}", run_id=run_id)
        audit = (TraceEvent.objects.filter(run_id=run_id, event_type="audit.effects")
                 .order_by("-seq").values_list("payload", flat=True).first()) or {}
        if audit.get("duplicates", 1) != 0 or audit.get("keys") != sizes.recovery_commits:
            raise BenchmarkError("the recovered run's audit is not exactly once", run_id=run_id)
        recovered = (TraceEvent.objects.filter(run_id=run_id, event_type="recovery.succeeded")
                     .order_by("-seq").values_list("payload", flat=True).first()) or {}
        restore.append(float(recovered.get("duration_seconds", 0.0)))
    report.metrics += [
        latency_metric("recovery_ms", "recovery: resume after SIGKILL until completed", total),
        latency_metric("recovery_restore_ms", "  of which restore + re-observe (trace)", restore),
    ]
