"""Scale: many runs of workspace writes through a two-process Celery worker, against DBOS.

``manage.py bench --only scale`` (DESIGN.md section 5.7 says how workers drive runs). One
repetition of Ratchet:

* setup, untimed: ``sizes.scale_runs`` scripted workspace runs of ``sizes.scale_writes`` writes
  each (:func:`runtime.bench.write_counts.workspace_task`), created with ``run_start``, each in
  its own workspace; then ``manage.py worker --concurrency 2`` -- the product's worker, two
  prefork pool processes, beat embedded -- is started and waited for until it is ready. Its
  broker is the server broker :data:`runtime.bench.scratch.BROKER_ENV` names (Redis), else a
  SQLite broker file of its own (the embedded default). Its periodic sweep is put off
  (``RATCHET_SWEEP_SECONDS=3600``): throughput, not recovery, is measured, and a sweep would only
  add duplicate messages for runs still waiting in the queue;
* timed: one ``ratchet.advance_run`` message per run is published (what
  :func:`runtime.workers.dispatch.run_enqueue` sends), and the clock stops when the database
  shows every run completed. Writes per second = runs x writes / seconds.

One repetition of the peer, right after (interleaved, so both see the same machine load): DBOS
Transact (``runtime/bench/peers/dbos/workload.py``, in its own virtual environment, made by the
parent, :mod:`runtime.bench.peers`): as many workflows of as many steps, each step the same
durable file write (temp file, fsync, rename, fsync the directory), run by two DBOS executor
processes taking one workflow at a time from a DBOS queue; timed from the first enqueue to the
last result. DBOS's system database follows the bench's engine: the scratch PostgreSQL database
``<scratch>_dbos`` (:func:`runtime.bench.scratch.scratch_peer_name`) on PostgreSQL, DBOS's own
embedded default (a SQLite file) on SQLite.

Reported: the medians of both, their ratio (Ratchet / DBOS), and the seconds of every repetition.
Without the peer's interpreter (its environment could not be made) only Ratchet is measured and
the facts say why.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from pathlib import Path

from django.conf import settings
from django.db.models import Sum

from runtime.bench.children import bench_broker_url, child_env, manage_argv, worker_stop
from runtime.bench.peers import peer_workload
from runtime.bench.report import BenchReport, Ratio, rate_metric
from runtime.bench.scratch import PEER_PYTHON_ENV, scratch_peer_url
from runtime.bench.sizes import BenchSizes
from runtime.bench.write_counts import workspace_task
from runtime.core.checkpoint import TERMINAL_PHASES, Phase
from runtime.engine import run_start
from runtime.errors import BenchmarkError
from runtime.models import Run
from runtime.workers.dispatch import ADVANCE_RUN_TASK, project_app, run_route

TIMEOUT_SECONDS = 3600.0
"""How long one repetition may take before the bench gives up (it then says how far it got)."""

READY_SECONDS = 120.0
"""How long the worker may take to say it is ready."""

POLL_SECONDS = 0.05
"""How often the database is asked whether every run completed."""

STALL_SECONDS = 120.0
"""How long no run may commit a generation before the bench gives up with the worker's log
(a run stopped on an error keeps its lease until it expires, and the bench's sweep is put off,
so it would otherwise wait the whole :data:`TIMEOUT_SECONDS`)."""


def _runs_create(*, directory: Path, task_id: str, runs: int, writes: int) -> list[str]:
    return [run_start(spec_path=workspace_task(directory=directory / f"{n:04d}", task_id=task_id,
                                               writes=writes), worker="bench-scale-creator")
            for n in range(runs)]


def _worker_start(*, work: Path, broker: str) -> subprocess.Popen[bytes]:
    log = work / "worker.log"
    env = child_env(CELERY_BROKER_URL=broker, RATCHET_SWEEP_SECONDS="3600")
    with log.open("wb") as out:
        proc = subprocess.Popen(manage_argv("worker", "--concurrency", "2", "--loglevel", "info"),
                                env=env, cwd=settings.BASE_DIR, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + READY_SECONDS
    while b" ready." not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            worker_stop(proc)
            raise BenchmarkError("the scale bench's worker did not get ready",
                                 exit_code=proc.poll(), log=log.read_text(errors="replace")[-300:])
        time.sleep(0.05)
    return proc


def _ratchet_once(*, work: Path, task_id: str, runs: int, writes: int) -> tuple[float, float]:
    """One repetition; returns (seconds from the first message to the last completion, seconds
    the untimed creation of the runs took)."""
    work.mkdir(parents=True)
    started = time.perf_counter()
    run_ids = _runs_create(directory=work / "runs", task_id=task_id, runs=runs, writes=writes)
    created = time.perf_counter() - started
    broker = bench_broker_url(work)
    proc = _worker_start(work=work, broker=broker)
    rows = Run.objects.filter(task_id=task_id)
    try:
        app = project_app()
        started = time.perf_counter()
        with app.connection_for_write(broker) as conn:
            for run_id in run_ids:
                app.send_task(ADVANCE_RUN_TASK, args=(run_id,), ignore_result=True,
                              connection=conn, **run_route(run_id=run_id))
        progress, moved = -1, time.perf_counter()
        while True:
            done = rows.filter(phase=Phase.COMPLETED).count()
            if done == runs:
                break
            now = time.perf_counter()
            if now - moved > 1.0:
                generations = rows.aggregate(total=Sum("generation"))["total"] or 0
                if generations != progress:
                    progress, moved = generations, now
            stopped = rows.filter(phase__in=TERMINAL_PHASES).exclude(phase=Phase.COMPLETED).count()
            if (stopped or proc.poll() is not None or now - started > TIMEOUT_SECONDS
                    or now - moved > STALL_SECONDS):
                raise BenchmarkError("the scale bench's worker did not complete every run",
                                     completed=done, stopped=stopped, exit_code=proc.poll(),
                                     log=(work / "worker.log").read_text(errors="replace")[-600:])
            time.sleep(POLL_SECONDS)
        seconds = time.perf_counter() - started
    finally:
        worker_stop(proc)
    files = sum(1 for _ in (work / "runs").glob("*/ws/data/f*.txt"))
    if files != runs * writes:
        raise BenchmarkError("the scale runs did not write every file", files=files,
                             expected=runs * writes)
    return seconds, created


def _peer_once(*, python: str, work: Path, runs: int, writes: int) -> dict[str, object]:
    """One repetition of the DBOS peer; returns its JSON line."""
    if settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        url = scratch_peer_url(db=settings.DATABASES["default"])
    else:
        url = f"sqlite:///{work.parent / 'dbos.sqlite3'}"
    work.mkdir(parents=True)
    argv = [python, str(peer_workload("dbos")), "drive", "--database-url", url, "--workflows",
            str(runs), "--steps", str(writes), "--processes", "2", "--dir", str(work)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
                              check=False, cwd=work)
    except subprocess.TimeoutExpired:
        raise BenchmarkError("the DBOS peer did not finish", seconds=TIMEOUT_SECONDS) from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise BenchmarkError("the DBOS peer failed", exit_code=done.returncode,
                             output=(done.stderr or done.stdout)[-400:])
    result: dict[str, object] = json.loads(lines[-1])
    return result


def scale_ratio(ratchet: list[float], peer: list[float]) -> float:
    """Ratchet's median writes/s over the peer's (above 1: Ratchet is faster).

    Raises:
        BenchmarkError: either list is empty.
    """
    if not ratchet or not peer:
        raise BenchmarkError("a scale ratio needs figures of both", ratchet=len(ratchet),
                             peer=len(peer))
    return statistics.median(ratchet) / statistics.median(peer)


def scale_paired_ratio(ratchet: list[float], peer: list[float]) -> float:
    """The median over repetitions of Ratchet's writes/s over the peer's in the same repetition.

    Each pair ran back to back, so on a machine whose load drifts between repetitions this is
    the steadier figure of the two (:func:`scale_ratio` compares medians of different moments).

    Raises:
        BenchmarkError: the lists are empty or of different lengths.
    """
    if not ratchet or len(ratchet) != len(peer):
        raise BenchmarkError("a paired scale ratio needs one figure of each per repetition",
                             ratchet=len(ratchet), peer=len(peer))
    return statistics.median(r / p for r, p in zip(ratchet, peer, strict=True))


def scale_measure(*, report: BenchReport, sizes: BenchSizes, work: Path) -> None:
    """Run ``sizes.scale_repeat`` interleaved repetitions of Ratchet and of the DBOS peer (if the
    parent named its interpreter in :data:`PEER_PYTHON_ENV`); append writes/s, their ratio and
    the seconds of each repetition to ``report``.

    Raises:
        BenchmarkError: the worker did not get ready or did not complete every run within
            :data:`TIMEOUT_SECONDS`, a run stopped short of completion, or the peer failed.
    """
    runs, writes = sizes.scale_runs, sizes.scale_writes
    python = os.environ.get(PEER_PYTHON_ENV, "")
    broker = bench_broker_url(work).split("://", 1)[0]
    postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    database = "PostgreSQL" if postgres else "SQLite"
    ratchet: list[float] = []
    peer: list[float] = []
    seconds: dict[str, list[float]] = {"ratchet": [], "dbos": [], "create": []}
    version = ""
    for rep in range(sizes.scale_repeat):
        took, created = _ratchet_once(work=work / f"ratchet-{rep}", task_id=f"bench-scale-{rep}",
                                      runs=runs, writes=writes)
        ratchet.append(runs * writes / took)
        seconds["ratchet"].append(round(took, 3))
        seconds["create"].append(round(created, 3))
        if python:
            result = _peer_once(python=python, work=work / "dbos" / f"rep-{rep}", runs=runs,
                                writes=writes)
            peer.append(float(result["writes"]) / float(result["seconds"]))  # type: ignore[arg-type]
            seconds["dbos"].append(round(float(result["seconds"]), 3))  # type: ignore[arg-type]
            version = str(result.get("dbos", ""))
    report.metrics += [
        rate_metric("scale_ratchet_writes_per_s",
                    f"scale: {runs} runs x {writes} workspace writes, `manage.py worker "
                    f"--concurrency 2` ({database} + {broker} broker)", "writes/s", ratchet),
        rate_metric("scale_ratchet_create_ms_per_run", "  run creation (untimed above), per run",
                    "ms", [s * 1000.0 / runs for s in seconds["create"]]),
    ]
    report.facts.update(scale_runs=runs, scale_writes=writes, scale_repeat=sizes.scale_repeat,
                        scale_broker=broker, scale_ratchet_seconds=seconds["ratchet"])
    if not peer:
        report.facts["scale_peer"] = "not measured: no peer environment (see the bench's stderr)"
        return
    report.metrics.append(rate_metric(
        "scale_dbos_writes_per_s", f"  DBOS {version}: {runs} workflows x {writes} durable file "
        f"writes, 2 executor processes ({database})", "writes/s", peer))
    report.ratios += [
        Ratio(name="scale_ratchet_vs_dbos", label="scale: Ratchet / DBOS writes per second",
              value=scale_ratio(ratchet, peer),
              note="median over median; above 1 Ratchet is faster, below 1 DBOS is"),
        Ratio(name="scale_ratchet_vs_dbos_paired",
              label="scale: Ratchet / DBOS, median of the per-repetition ratios",
              value=scale_paired_ratio(ratchet, peer),
              note="each repetition's pair ran back to back: steadier when the load drifts"),
    ]
    report.facts.update(scale_peer=f"dbos {version}", scale_dbos_seconds=seconds["dbos"])
