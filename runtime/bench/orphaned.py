"""Runs orphaned by a dead worker, resumed by a Celery worker and by ``resume --all-orphaned``
(DESIGN.md section 5.7).

Setup (untimed): ``sizes.orphans`` runs of a one-write scripted workspace task, each in its own
directory, are created; then a worker takes each one's lease and "dies" (nobody renews or
releases the leases; the database clock lets them expire). That is what the database shows after
a worker holding that many runs is SIGKILLed, without having to build a worker that holds a
thousand runs at once.

Timed: ``manage.py worker --concurrency 2`` (two pool processes, beat embedded, on a SQLite
broker file of its own, or on the server broker ``RATCHET_BENCH_BROKER_URL`` names: the bench
child drops every other ``CELERY_*`` variable) is started, and the clock runs from its start
until every run was re-leased and until every run completed, polled in the database. Then as many runs again are
orphaned and resumed in-process by :func:`runtime.workers.orphans.orphans_resume_all` with two child
processes (what ``manage.py resume --all-orphaned --jobs 2`` does).
Checked afterwards: every run completed, with exactly one recovery.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from django.conf import settings
from django.db.models import Count

from runtime.bench.children import bench_broker_url, child_env, manage_argv, worker_stop
from runtime.bench.report import BenchReport, rate_metric
from runtime.bench.sizes import BenchSizes
from runtime.engine import run_start
from runtime.errors import BenchmarkError
from runtime.models import Run, TraceEvent
from runtime.ownership.leases import lease_acquire
from runtime.workers.orphans import orphans_resume_all
from runtime.workers.sweeper import runs_needing_recovery

DEAD_WORKER = "bench-dead-worker:1"
"""The worker that took every run's lease and died."""

DEAD_LEASE_SECONDS = 1.0
"""Time to live of the dead worker's leases (seconds): they expire right after the setup."""

TIMEOUT_SECONDS = 3600.0
"""How long the worker may take before the bench gives up (it then says how far it got)."""

_SPEC = """\
[task]
id = "{task_id}"
version = "1"

[policy]
id = "bench-orphans"
version = "1"
allowed_actions = ["write_file"]
allowed_paths = ["**"]
approval_risks = []

[policy.budgets]
proposals = 10
steps = 10
wall_seconds = 86400
cost_micros = 0

[environment]
adapter = "workspace"
target = "ws"

[planner]
kind = "scripted"

[[planner.steps]]
target = "result.txt"
content = "written once\\n"

[verifier]
kind = "always"
"""


def _orphan(*, directory: Path, task_id: str, count: int) -> list[str]:
    """Create ``count`` runs of task ``task_id`` and leave each with an expired lease."""
    run_ids = []
    for n in range(count):
        run_dir = directory / f"{n:05d}"
        (run_dir / "ws").mkdir(parents=True)
        spec = run_dir / "task.toml"
        spec.write_text(_SPEC.format(task_id=task_id), encoding="utf-8")
        run_ids.append(run_start(spec_path=spec, worker="bench-creator"))
    for run_id in run_ids:
        lease_acquire(run_id=run_id, worker=DEAD_WORKER, ttl_seconds=DEAD_LEASE_SECONDS)
    deadline = time.monotonic() + 60
    while len(runs_needing_recovery(idle_seconds=3600)) < count:
        if time.monotonic() > deadline:
            raise BenchmarkError("the dead worker's leases did not expire", task_id=task_id)
        time.sleep(0.05)
    return run_ids


def _check(task_id: str, count: int) -> None:
    runs = Run.objects.filter(task_id=task_id)
    done = runs.filter(phase="completed").count()
    recoveries = (TraceEvent.objects.filter(run__task_id=task_id, event_type="recovery.succeeded")
                  .values("run_id").annotate(n=Count("seq")).values_list("n", flat=True))
    if done != count or sorted(set(recoveries)) != [1] or len(recoveries) != count:
        raise BenchmarkError("not every orphan completed with exactly one recovery",
                             task_id=task_id, completed=done, recovered=len(recoveries))


def _celery_resume(*, task_id: str, count: int, work: Path) -> dict[str, float]:
    runs = Run.objects.filter(task_id=task_id)
    log = work / "worker.log"
    env = child_env(CELERY_BROKER_URL=bench_broker_url(work))
    with log.open("wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(manage_argv("worker", "--concurrency", "2", "--loglevel", "info"),
                                env=env, cwd=settings.BASE_DIR, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    marks: dict[str, float] = {}
    try:
        while True:
            elapsed = time.perf_counter() - started
            if "ready" not in marks and b" ready." in log.read_bytes():
                marks["ready"] = elapsed
            released = runs.exclude(owner_worker=DEAD_WORKER).count()
            if released and "first_released" not in marks:
                marks["first_released"] = elapsed
            if released == count and "all_released" not in marks:
                marks["all_released"] = elapsed
            if runs.filter(phase="completed").count() == count:
                marks["all_completed"] = elapsed
                break
            if proc.poll() is not None or elapsed > TIMEOUT_SECONDS:
                raise BenchmarkError("the worker did not complete every orphan",
                                     released=released, exit_code=proc.poll(),
                                     log=log.read_text(errors="replace")[-300:])
            time.sleep(0.1)
    finally:
        worker_stop(proc)
    marks.setdefault("ready", marks["all_completed"])
    return marks


def orphaned_measure(*, report: BenchReport, sizes: BenchSizes, work: Path) -> None:
    """Orphan ``sizes.orphans`` runs, time a two-process Celery worker re-leasing and completing
    them all, then do the same with ``orphans_resume_all(jobs=2)``; append the times to
    ``report``.

    Raises:
        BenchmarkError: a lease did not expire, the worker did not finish within an hour, or a
            run did not complete with exactly one recovery.
    """
    n = sizes.orphans
    celery_task = "bench-orphans-celery"
    _orphan(directory=work / "celery", task_id=celery_task, count=n)
    marks = _celery_resume(task_id=celery_task, count=n, work=work)
    _check(celery_task, n)

    inprocess_task = "bench-orphans-resume"
    _orphan(directory=work / "resume", task_id=inprocess_task, count=n)
    started = time.perf_counter()
    outcomes = orphans_resume_all(jobs=2)
    inprocess = time.perf_counter() - started
    if len(outcomes) != n:
        raise BenchmarkError("resume --all-orphaned did not find every orphan", found=len(outcomes))
    _check(inprocess_task, n)

    report.metrics += [
        rate_metric("orphans_worker_ready_s", f"{n} orphans, Celery x2: worker ready", "s",
                    [marks["ready"]]),
        rate_metric("orphans_first_released_s", "  first run re-leased", "s",
                    [marks["first_released"]]),
        rate_metric("orphans_all_released_s", "  all re-leased", "s", [marks["all_released"]]),
        rate_metric("orphans_all_completed_s", "  all completed (from worker start)", "s",
                    [marks["all_completed"]]),
        rate_metric("orphans_celery_ms_per_run", "  per run, after the worker was ready", "ms",
                    [(marks["all_completed"] - marks["ready"]) * 1000.0 / n]),
        rate_metric("orphans_resume_all_s", f"{n} orphans, `resume --all-orphaned --jobs 2`", "s",
                    [inprocess]),
        rate_metric("orphans_resume_all_ms_per_run", "  per run", "ms", [inprocess * 1000.0 / n]),
    ]
    report.facts["orphans"] = n
