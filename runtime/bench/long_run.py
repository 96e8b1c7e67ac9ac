"""A long run's worker memory: does a process driving 10,000 steps keep its size?

A child process (``manage.py bench --long-run-child``) drives one scripted workspace run the way
a Celery worker under contention does -- ``run_advance`` for 8 steps at a time (or
``RATCHET_STEPS_PER_TASK``), taking and releasing the lease each time, the harder case for memory --
and samples its own resident set size (``/proc/self/statm``)
after every committed step, with the time since the start. The figure is the mean RSS over the
last 10% of the steps over the mean over the first 10%, minus one, whose target is under 10% (a worker that
keeps a run's reads must not grow with the run);
the time per step over the same two tenths says whether a step gets slower as the run grows. A
wall-clock budget stops a run that gets too slow; the report then says how many steps it reached.
A batch whose lease expired mid-step (an overloaded machine) is counted and the next batch takes
the run again, as the next delivery of a worker's task would.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from django.conf import settings

from runtime.bench.children import child_env, manage_argv
from runtime.bench.report import BenchReport, rate_metric
from runtime.bench.sizes import BenchSizes
from runtime.bench.write_counts import workspace_task
from runtime.engine import run_advance, run_start
from runtime.errors import BenchmarkError, LeaseLostError
from runtime.workers.sweeper import LIVE_PHASES


def long_run_task(*, directory: Path, steps: int) -> Path:
    """Write a scripted workspace task of ``steps`` writes over 64 files; return its path. With one
    commit per write (the default, DESIGN.md section 4.13) a write is about one step, so the run
    lasts the ``steps`` asked; with two steps per write the drive stops at ``steps`` anyway."""
    return workspace_task(directory=directory, task_id="bench-long-run", writes=max(1, steps), files=64)


def _rss_kib() -> int:
    try:
        resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        raise BenchmarkError("cannot read this process's RSS (/proc/self/statm)") from None
    return resident_pages * os.sysconf("SC_PAGE_SIZE") // 1024


def long_run_drive(*, task: Path, steps: int, seconds: float) -> dict[str, Any]:
    """In the child: start the run and drive it in worker-sized batches until ``steps`` steps,
    the end of the run, or ``seconds`` of wall clock; return the RSS samples (KiB, one per
    step) and what was reached."""
    run_id = run_start(spec_path=task, worker="bench-long-run")
    samples: list[int] = []
    stamps: list[float] = []
    started = time.perf_counter()
    phase = "running"

    def sample(_step: object) -> None:
        samples.append(_rss_kib())
        stamps.append(time.perf_counter() - started)

    lease_losses = 0
    while len(samples) < steps and time.perf_counter() - started < seconds:
        try:
            report = run_advance(run_id=run_id, worker="bench-long-run",
                                 max_steps=min(settings.RATCHET_STEPS_PER_TASK or 8,
                                               steps - len(samples)),
                                 on_step=sample)
        except LeaseLostError:
            # A step that outlived its lease on an overloaded machine: a worker's task would
            # end here and the next delivery take the run again; so does the next batch.
            lease_losses += 1
            continue
        phase = report.phase
        if phase not in LIVE_PHASES:
            break
    return {"run_id": run_id, "rss_kib": samples, "at_s": stamps,
            "seconds": time.perf_counter() - started, "phase": phase,
            "lease_losses": lease_losses}


def long_run_measure(*, report: BenchReport, sizes: BenchSizes, work: Path) -> None:
    """Run :func:`long_run_drive` in a child process and append the RSS at the start and end
    and the growth (last 10% over first 10% of the steps) to ``report``.

    Raises:
        BenchmarkError: the child failed or took fewer than 10 steps.
    """
    directory = work / "long-run"
    task = long_run_task(directory=directory, steps=sizes.long_run_steps)
    out = directory / "samples.json"
    proc = subprocess.run(
        manage_argv("bench", "--long-run-child", str(task), "--long-run-out", str(out),
                    "--long-run-steps", str(sizes.long_run_steps),
                    "--long-run-seconds", str(sizes.long_run_seconds)),
        env=child_env(), cwd=settings.BASE_DIR, capture_output=True, text=True, check=False,
        timeout=sizes.long_run_seconds + 600)
    if proc.returncode != 0 or not out.exists():
        tail = proc.stderr.strip().splitlines()[-1:]
        raise BenchmarkError(f"the long-run child failed: {tail[0] if tail else ''}"[:500],
                             exit_code=proc.returncode)
    data = json.loads(out.read_text(encoding="utf-8"))
    rss = data["rss_kib"]
    if len(rss) < 10:
        raise BenchmarkError("the long run took fewer than 10 steps", steps=len(rss))
    tenth = max(1, len(rss) // 10)
    first, last = statistics.mean(rss[:tenth]) / 1024, statistics.mean(rss[-tenth:]) / 1024
    growth = (last / first - 1.0) * 100.0
    reached = len(rss)
    note = "" if reached >= sizes.long_run_steps else (
        f" (stopped by the {sizes.long_run_seconds:.0f} s budget)")
    report.metrics += [
        rate_metric("long_run_rss_first_mib", f"long run of {reached} steps{note}: RSS, first 10%",
                    "MiB", [first]),
        rate_metric("long_run_rss_last_mib", "  RSS, last 10%", "MiB", [last]),
        rate_metric("long_run_rss_growth_pct", "  RSS growth, last 10% over first 10%", "%",
                    [growth]),
        rate_metric("long_run_ms_per_step", "  per step (worker-sized batches)", "ms",
                    [data["seconds"] * 1000.0 / reached]),
    ]
    at = data.get("at_s") or []
    if len(at) == reached:
        # Seconds per step over the first and the last 10% of the steps: flat or growing.
        report.metrics += [
            rate_metric("long_run_ms_per_step_first", "  per step, first 10% of the steps", "ms",
                        [(at[tenth - 1] - 0.0) * 1000.0 / tenth]),
            rate_metric("long_run_ms_per_step_last", "  per step, last 10% of the steps", "ms",
                        [(at[-1] - at[-tenth - 1]) * 1000.0 / tenth]),
        ]
    report.facts["long_run_steps"] = reached
    report.facts["long_run_lease_losses"] = data.get("lease_losses", 0)
    report.facts["long_run_steps_asked"] = sizes.long_run_steps
