"""Drive one chaos run through Celery, for campaigns with the ``broker-restart`` fault (section 8.8).

The run is created here (``runtime.engine.run_start``, which commits generation 1 and releases
its lease) and its ``ratchet.advance_run`` message is published to the campaign's own Redis
broker (``runtime.chaos.broker``); from then on the product's own worker drives it: ``manage.py
worker`` (one pool process, the sweeper embedded), a child process group with
``CELERY_BROKER_URL`` set to that broker and ``RATCHET_SWEEP_SECONDS=1``. The drive only
watches the run row and delivers the faults, at the moments the seeded
:class:`~runtime.chaos.drive.KillSchedule` draws while the worker holds the run's lease:

* ``broker-restart``: the broker is SIGKILLed, stays down for a drawn ``OUTAGE_SECONDS`` and is
  started again on the same port, empty (it keeps nothing on disk). The worker meets the lost
  connection, cancels the task in flight (``CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS``)
  and reconnects; nothing of the run was in the broker (messages carry ids only), and the
  embedded sweeper re-queues it once its lease has expired (``runtime.workers.sweeper``). It
  lands when the server was alive and the run had work left at the moment of the kill;
* ``sigkill``: the worker's whole process group (worker, pool, beat) is SIGKILLed and a new
  worker is started, whose start-up sweep takes the run over when the lease expires;
* the other kinds go through the :class:`~runtime.chaos.faults.FaultInjector` with the worker
  as the holder (its processes carry its name as ``PGAPPNAME``).

The drive stops when the run row reaches a stopped phase, then stops the worker.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from celery import Celery
from django.conf import settings

from runtime.chaos.broker import BrokerServer
from runtime.chaos.drive import MAX_ROUNDS, POLL_SECONDS, STOPPED_PHASES, Child, DriveLog, KillSchedule, run_row
from runtime.chaos.faults import OUTAGE_SECONDS, FaultInjector
from runtime.engine import run_start
from runtime.errors import ChaosSetupError, RatchetError
from runtime.replay_check.processes import group_kill, group_runs_git, group_start
from runtime.workers.dispatch import ADVANCE_RUN_TASK, run_queue

SWEEP_SECONDS = 1.0
"""The campaign worker's ``RATCHET_SWEEP_SECONDS``: a run whose message the broker lost is
re-queued about this long after its lease expires (the default of 10 s would make most of a
campaign's time waiting)."""
_STOP_SECONDS = 15.0
"""How long a stopped run's worker gets for a warm shutdown before its group is SIGKILLed."""


def _publish(*, broker: BrokerServer, run_id: str) -> None:
    """Send ``ratchet.advance_run(run_id)`` to the campaign's broker, as any producer would."""
    producer = Celery("ratchet-chaos-producer", broker=broker.url, set_as_current=False)
    try:
        producer.send_task(ADVANCE_RUN_TASK, args=[run_id], queue=run_queue(run_id=run_id), ignore_result=True)
    finally:
        producer.close()


def _worker_stop(child: Child) -> None:
    """Warm shutdown (SIGTERM to the worker's pid), then SIGKILL to its whole group."""
    if child.proc.poll() is None:
        child.proc.send_signal(signal.SIGTERM)
        try:
            child.proc.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            pass
    # Pool and beat processes outlive a parent that died or was killed: the group goes too.
    group_kill(child.proc)
    if child.proc.poll() is None:
        child.proc.wait()
    child.returncode = child.proc.returncode


def _worker_error(children: list[Child]) -> str:
    """The last error line any worker of the run logged ("" if none)."""
    for child in reversed(children):
        try:
            lines = child.stderr.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in reversed(lines):
            if "ERROR" in line or "CRITICAL" in line:
                return line.strip()[-500:]
    return ""


def _broker_restart(*, broker: BrokerServer, run_id: str, rng: random.Random) -> tuple[bool, bool]:
    """Kill the broker, keep it down for a drawn outage, start it again empty.

    Returns:
        ``(killed, work_left)``: the server was running and is now SIGKILLed; the run had not
        stopped at that moment (read right after the kill, before the outage).
    """
    killed = broker.kill()
    work_left = run_row(run_id).get("phase") not in STOPPED_PHASES
    time.sleep(rng.uniform(*OUTAGE_SECONDS))
    broker.start()
    return killed, work_left


def chaos_celery_drive(*, task: Path, plan: KillSchedule, recoverers: int, rng: random.Random,
                       lease_seconds: float, env: Mapping[str, str], logs: Path, tag: str,
                       crash_at: str | None = None, child_timeout: float = 600.0,
                       fault_kinds: tuple[str, ...] = ("broker-restart",),
                       injector: FaultInjector | None = None) -> DriveLog:
    """Create the run of ``task``, let a Celery worker drive it until it stops, faulting per ``plan``.

    The arguments are :func:`runtime.chaos.drive.chaos_run_drive`'s; ``recoverers`` is not
    used (one worker drives the run; its sweeper is the recoverer), and ``crash_at`` must be None.

    Raises:
        ChaosSetupError: no injector with the campaign's broker, or a crash point asked for.

    Returns:
        A :class:`~runtime.chaos.drive.DriveLog` whose ``children`` are the workers started; a
        run that could not be created or did not stop is its ``error``, never an exception.
    """
    if injector is None or injector.broker is None:
        raise ChaosSetupError("a run driven through Celery needs the campaign's own broker")
    if crash_at is not None:
        raise ChaosSetupError("named crash points are armed in run/resume children, not in a Celery worker")
    broker = injector.broker
    logs.mkdir(parents=True, exist_ok=True)
    base_env = {k: v for k, v in env.items() if k != "RATCHET_CRASH_AT"}
    base_env.update(RATCHET_LEASE_SECONDS=f"{lease_seconds:g}", RATCHET_SWEEP_SECONDS=f"{SWEEP_SECONDS:g}",
                    CELERY_BROKER_URL=broker.url)
    manage = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py")]
    log = DriveLog()

    def start_worker() -> Child:
        index = len(log.children)
        name = f"chaos-{tag}-{index}"
        child_env = dict(base_env, RATCHET_WORKER_ID=name, PGAPPNAME=name)
        out, err = logs / f"{tag}-{index:03d}.out", logs / f"{tag}-{index:03d}.err"
        proc = group_start([*manage, "worker", "--concurrency", "1", "--hostname", f"{name}@%h"],
                           env=child_env, cwd=Path(settings.BASE_DIR), stdout=out, stderr=err)
        child = Child(index=index, command="worker", worker=name, proc=proc, stdout=out, stderr=err)
        log.children.append(child)
        return child

    started = time.monotonic()
    if broker.proc is None:  # an earlier drive was interrupted while it was down
        broker.start()
    broker.flush()  # what an earlier run's worker left queued is not this run's
    try:
        log.run_id = run_start(spec_path=task, ttl_seconds=lease_seconds)
    except RatchetError as exc:
        log.error = f"the run was not created: {exc}"
        log.wall_seconds = time.monotonic() - started
        return log
    _publish(broker=broker, run_id=log.run_id)
    worker = start_worker()
    rounds = seen_generation = 0
    since_fault: tuple[float, int] | None = None
    faulted: tuple[str, int] | None = None
    try:
        while True:
            now = time.monotonic()
            row = run_row(log.run_id)
            generation = row.get("generation", 0)
            if since_fault is not None and generation > since_fault[1]:
                log.progress_seconds.append(now - since_fault[0])
                since_fault = None
            if generation > seen_generation:
                seen_generation, rounds = generation, 0
            if row.get("phase") in STOPPED_PHASES:
                break
            if now - started > child_timeout:
                log.error = f"the run did not stop within {child_timeout:.0f} s"
                break
            if worker.proc.poll() is not None:
                worker.returncode = worker.proc.returncode
                rounds += 1
                if rounds > MAX_ROUNDS:
                    log.error = f"gave up after {MAX_ROUNDS} workers without progress"
                    break
                # Killed by a fault or died on its own: the next worker's start-up sweep finds the run.
                worker = start_worker()
                continue
            owner = str(row.get("owner_worker", ""))
            # After a fault the row keeps naming the holder it hit until its lease is taken anew:
            # the next fault waits for a new holder or a commit, so it meets a run being driven.
            fresh = faulted is None or generation > faulted[1] or owner != faulted[0]
            if plan.kills > 0 and fresh and owner.startswith(f"{worker.worker}:"):
                if worker.kill_target is None:
                    worker.kill_target, worker.kill_delay = plan.next_kill(generation=generation)
                if worker.kill_at is None and generation >= worker.kill_target:
                    worker.kill_at = now + worker.kill_delay
                if worker.kill_at is not None and now >= worker.kill_at:
                    kind = fault_kinds[log.kills % len(fault_kinds)]
                    in_git = bool(group_runs_git(worker.proc.pid))
                    if kind == "broker-restart":
                        # Judged at the kill: a task the worker failed to cancel may finish the run
                        # during the outage, which the fault did not make any less real.
                        landed, work_left = _broker_restart(broker=broker, run_id=log.run_id, rng=rng)
                    else:
                        landed = worker.kill() if kind == "sigkill" else injector.inject(
                            kind=kind, proc=worker.proc, worker=worker.worker, rng=rng)
                        work_left = run_row(log.run_id).get("phase") not in STOPPED_PHASES
                    # The same worker (or its successor) draws its next fault afresh.
                    worker.kill_target = worker.kill_at = None
                    faulted = (owner, generation)
                    if landed:
                        if not work_left:
                            log.late_kills += 1
                            continue
                        plan.kills -= 1
                        log.delivered(kind=kind, in_git=in_git)
                        rounds = 0
                        since_fault = (now, generation)
                    continue
            time.sleep(POLL_SECONDS)
    finally:
        # Done, or interrupted (SIGTERM, ^C): no worker outlives the drive, and the broker is up
        # for the next run.
        _worker_stop(worker)
        if broker.proc is None:
            broker.start()
    log.missed = plan.kills
    log.phase = run_row(log.run_id).get("phase", "-")
    if log.phase != "completed" and not log.error:
        log.error = _worker_error(log.children)
    log.wall_seconds = time.monotonic() - started
    return log
