"""Celery tasks: drive each run for a time slice under one lease, and re-queue runs whose worker died.

``ratchet.advance_run(run_id, generation=None)`` drives one run (``runtime.engine.run_advance``)
under one lease and one restored session for as long as it has steps to do, and hands it back
to the queue (enqueues itself again) only when its time slice is used up and other runs wait for
a worker, or after ``RATCHET_TASK_MAX_SECONDS`` in any case (:class:`TimeSlice`), so many runs
interleave across any number of workers and a restore happens when ownership changes, not per
task.
``ratchet.sweep`` (at worker start-up, on beat every ``RATCHET_SWEEP_SECONDS``, and once more
when a lease expires sooner than that) re-queues the runs the database says nobody is driving
(``runtime.workers.sweeper``), one message per run, or ``ratchet.advance_runs`` batches of them when the
backlog is larger than ``SWEEP_MESSAGES`` (each run of a batch is handled as its own message).

Delivery is at least once (acks late; on Redis and RabbitMQ a message held by a pool process
that dies goes back to the queue), so every message must be safe to deliver twice (DESIGN.md
sections 4-5):

* the lease decides who drives a run: a second delivery while a worker holds it is dropped
  (``LeaseHeldError``), and a worker that lost it stops at its next fenced commit;
* a message names the generation it expects (continuations and sweeps do); one that finds the
  run at another generation is an outdated duplicate and is dropped, so duplicates never turn
  into two chains of messages chasing one run;
* a redelivered step recovers through the engine's crash-window table: the adapter is queried by
  idempotency key before anything is executed, so the same key never has a second effect.

Messages carry only ids and are JSON. Retries are for connection-class errors only; a restore
that fails closed needs a human: the task logs it and does not retry, and the sweeper stops
re-queueing the run once a recovery of it has failed (``runtime.workers.sweeper``).
Follow-up messages are published on commit (``transaction.on_commit``) so a worker never sees a
run before the transaction that made it ready is visible. Services that make a run live again
address ``ratchet.advance_run`` by name through ``runtime.workers.dispatch.run_enqueue``; nothing imports
this module but Celery's task discovery.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from celery import Task, shared_task
from django.conf import settings
from django.db import InterfaceError
from django.db import OperationalError as DatabaseOperationalError
from kombu.exceptions import OperationalError as BrokerOperationalError

from runtime.archive.runs import archive_pass
from runtime.archive.selection import ArchiveSelection
from runtime.checkpoints.row_agreement import run_row_confirm
from runtime.core.tracing import run_scope
from runtime.engine import run_advance
from runtime.engine.blocked import RESTART_HINT
from runtime.errors import (
    CheckpointError,
    LeaseHeldError,
    LeaseLostError,
    PluginLoadError,
    PluginNotFoundError,
    PluginVersionMismatchError,
    RatchetError,
    RunArchivedError,
    SigningError,
    StaleGenerationError,
    TraceChainError,
)
from runtime.models import Run
from runtime.rollout.combinations import combination_refusal_trace
from runtime.workers.dispatch import ADVANCE_RUN_TASK, run_route
from runtime.workers.sweeper import LIVE_PHASES, lease_expiry_next, runs_needing_recovery, runs_waiting

log = logging.getLogger("runtime.workers.tasks")

SWEEP_LIMIT = 1000
"""Most runs one sweep re-queues; a larger backlog is worked off over the next sweeps."""

SWEEP_MESSAGES = 50
"""A sweep sends at most about this many messages: up to this many orphans get one
``advance_run`` message each; a larger backlog goes out as ``advance_runs`` batches of
``ceil(n / SWEEP_MESSAGES)`` runs (DESIGN.md section 5.7). Publishing is the sweep's cost (one
broker commit per message, ~50 ms on the embedded SQLite broker), while enough messages remain
to spread the backlog over every pool process of a fleet."""


def _connection_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [
        DatabaseOperationalError, InterfaceError, BrokerOperationalError, ConnectionError,
    ]
    try:
        import redis.exceptions
    except ImportError:  # Redis is optional: the embedded default and RabbitMQ do without it
        pass
    else:
        errors += [redis.exceptions.ConnectionError, redis.exceptions.TimeoutError]
    return tuple(errors)


CONNECTION_ERRORS = _connection_errors()
"""The only errors worth retrying: the database or the broker was briefly unreachable."""


def worker_id(task: Task) -> str:
    """This pool process's lease identity: ``<RATCHET_WORKER_ID or celery hostname>:<pid>``.

    Every pool process needs its own identity: a lease is re-entrant for its holder, so two
    processes sharing an id could both believe they hold it. Under the ``threads`` pool the
    thread id is appended for the same reason (green-thread pools are not supported).
    """
    base = settings.RATCHET_WORKER_ID or task.request.hostname or socket.gethostname()
    ident = f"{base}:{os.getpid()}"
    if threading.current_thread() is not threading.main_thread():
        ident += f":{threading.get_native_id()}"
    return ident


@shared_task(bind=True, name=ADVANCE_RUN_TASK, acks_late=True, ignore_result=True,
             autoretry_for=CONNECTION_ERRORS, retry_backoff=True, retry_backoff_max=60,
             retry_jitter=True, max_retries=5)
def advance_run(self: Task, run_id: str, generation: int | None = None) -> str:
    """Drive ``run_id`` for one time slice (:class:`TimeSlice`); re-enqueue while it is live.

    Args:
        run_id: the run.
        generation: the committed generation this message expects, or None (any). A message
            that finds the run at another generation is an outdated duplicate and is dropped.

    Returns:
        What happened, for the worker log: ``"continued"``, the phase the run stopped in
        (``"completed"``, ``"awaiting_approval"``, ...), or why the message was dropped
        (``"stale"``, ``"not-live"``, ``"lease-held"``, ``"superseded"``, ``"needs-human"``,
        ``"error"``, ``"unknown-run"``, ``"no-progress"``).

    Raises:
        Only the connection-class errors in :data:`CONNECTION_ERRORS`, which Celery retries
        with exponential backoff (at most 5 times); every typed runtime error is logged and
        the message acknowledged (DESIGN.md section 4: a lost lease or a fail-closed restore
        must never be retried blindly).
    """
    return advance_run_once(run_id=run_id, generation=generation, worker=worker_id(self))


class TimeSlice:
    """When a task hands its run back to the queue (DESIGN.md section 5.7).

    For ``slice_seconds`` (``RATCHET_TASK_SLICE_SECONDS``) the task keeps stepping. After that it
    looks, at most once per slice, whether another live run waits for a worker
    (:func:`runtime.workers.sweeper.runs_waiting`) and stops if one does; after ``max_seconds``
    (``RATCHET_TASK_MAX_SECONDS``) it stops in any case. A run stopped this way is re-queued at
    the back, so every waiting run gets a pool process within about one slice per run ahead of
    it, and a run alone on the fleet keeps its lease, session and adapter for as long as it
    works. Times are this process's monotonic clock: they decide only when to yield, never who
    owns the run (the lease does, by the database clock).
    """

    def __init__(self, *, run_id: str, slice_seconds: float, max_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.run_id = run_id
        self.slice_seconds = slice_seconds
        self.max_seconds = max_seconds
        self.clock = clock
        self.started = clock()
        self.next_look = self.started + slice_seconds

    def __call__(self, session: object = None) -> bool:
        """True while the task should take another step."""
        now = self.clock()
        if now - self.started >= self.max_seconds:
            return False
        if now < self.next_look:
            return True
        self.next_look = now + self.slice_seconds
        return not runs_waiting(besides=self.run_id)


def advance_run_once(*, run_id: str, generation: int | None, worker: str) -> str:
    """The body of :func:`advance_run`, callable without a broker (see its docstring); every log
    line it writes carries the run id (DESIGN.md section 8.6)."""
    with run_scope(run_id):
        return _advance_run_once(run_id=run_id, generation=generation, worker=worker)


def _advance_run_once(*, run_id: str, generation: int | None, worker: str) -> str:
    row = Run.objects.filter(run_id=run_id).values("phase", "generation").first()
    if row is None:
        log.error("advance_run: run %s does not exist; dropping the message", run_id)
        return "unknown-run"
    if row["phase"] not in LIVE_PHASES:
        # Terminal, or frozen for a human: the approval/decision service re-enqueues it. The row
        # is an unsigned copy, so it is confirmed against the signed checkpoint before the
        # message is dropped (DESIGN.md section 4.10): an edited row must not stop a live run.
        try:
            run_row_confirm(run_id=run_id, worker=worker)
        except RunArchivedError:
            log.info("advance_run: run %s was archived; nothing to do", run_id)
            return "not-live"
        except (CheckpointError, SigningError) as exc:
            log.error("advance_run: run %s row says %s but cannot be confirmed (needs a human): %s",
                      run_id, row["phase"], exc)
            return "needs-human"
        log.info("advance_run: run %s is %s; nothing to do", run_id, row["phase"])
        return "not-live"
    if generation is not None and row["generation"] != generation:
        log.info("advance_run: run %s is at generation %s, the message expected %s: an outdated "
                 "duplicate; dropping it", run_id, row["generation"], generation)
        return "stale"
    try:
        report = run_advance(run_id=run_id, worker=worker, max_steps=settings.RATCHET_STEPS_PER_TASK,
                             keep_going=TimeSlice(run_id=run_id, slice_seconds=settings.RATCHET_TASK_SLICE_SECONDS,
                                                  max_seconds=settings.RATCHET_TASK_MAX_SECONDS))
    except LeaseHeldError as exc:
        log.info("advance_run: run %s is held by %s; dropping the message (the sweeper re-queues "
                 "the run if that lease expires)", run_id, exc.context.get("holder", "?"))
        return "lease-held"
    except (LeaseLostError, StaleGenerationError) as exc:
        log.warning("advance_run: run %s was taken over while %s drove it; stopping: %s",
                    run_id, worker, exc)
        return "superseded"
    except PluginVersionMismatchError as exc:
        # This worker runs other code than the run's pinned combination (DESIGN.md section 8.4):
        # it refuses to advance rather than execute under different code.
        log.error("advance_run: run %s is pinned to other code than %s runs; refusing: %s", run_id, worker, exc)
        combination_refusal_trace(run_id=run_id, worker=worker, error=exc)
        return "wrong-combination"
    except (PluginNotFoundError, PluginLoadError) as exc:
        # Traced as run.blocked by the engine (runtime/engine/blocked.py): this worker lacks the
        # run's code; a worker that has it takes the run on the sweeper's next delivery.
        log.error("advance_run: run %s is blocked on %s: %s; %s", run_id, worker, exc, RESTART_HINT)
        return "blocked"
    except (CheckpointError, SigningError, TraceChainError) as exc:
        log.error("advance_run: run %s cannot be restored and needs a human (not retried): %s",
                  run_id, exc)
        return "needs-human"
    except RatchetError as exc:
        # The lease stays with this worker until it expires; then the sweeper re-queues the run,
        # which is the bounded retry for retryable errors (adapter busy, blob not yet stored).
        level = logging.WARNING if exc.retryable else logging.ERROR
        log.log(level, "advance_run: run %s stopped on %s: %s", run_id, type(exc).__name__, exc)
        return "error"
    if report.phase not in LIVE_PHASES:
        log.info("advance_run: run %s is %s at generation %s", run_id, report.phase,
                 report.generation)
        return report.phase
    if report.steps == 0:
        # Cannot happen with max_steps >= 1 unless the engine changes; re-enqueueing a run that
        # does not move would spin, so leave it to the sweeper's idle rule instead.
        log.warning("advance_run: run %s made no progress; leaving it to the sweeper", run_id)
        return "no-progress"
    _enqueue(run_id, report.generation)
    return "continued"


def _enqueue(run_id: str, generation: int | None) -> None:
    # Routed to the queue of the run's combination (DESIGN.md section 8.4).
    advance_run.apply_async_on_commit(args=(run_id, generation), **run_route(run_id=run_id))


ADVANCE_RUNS_TASK = "ratchet.advance_runs"
"""The registered name of :func:`advance_runs` (a sweep's batch of runs)."""


@shared_task(bind=True, name=ADVANCE_RUNS_TASK, acks_late=True, ignore_result=True,
             autoretry_for=CONNECTION_ERRORS, retry_backoff=True, retry_backoff_max=60,
             retry_jitter=True, max_retries=5)
def advance_runs(self: Task, runs: list[list[str | int]]) -> dict[str, int]:
    """Drive each ``[run_id, generation]`` of a sweep's batch in turn, as :func:`advance_run`.

    Every run goes through :func:`advance_run_once` with the generation the sweep found, so the
    batch is as safe to deliver twice as a single message (DESIGN.md sections 4-5): a run that
    moved on is dropped as stale, one someone else holds as lease-held, a finished one as
    not-live. A run still live after its steps gets its own ``advance_run`` continuation. A
    worker that dies mid-batch leaves the untouched runs as they were found (expired or idle):
    the sweeper finds them again.

    Args:
        runs: ``[run_id, generation]`` pairs (JSON lists), oldest first.

    Returns:
        How many runs ended each way (``{"completed": 9, "stale": 1}``), for the worker log.

    Raises:
        Only the connection-class errors in :data:`CONNECTION_ERRORS` (retried: the whole batch
        is delivered again, and the runs already driven are dropped as stale or not-live).
    """
    me = worker_id(self)
    outcomes: dict[str, int] = {}
    for run_id, generation in runs:
        outcome = advance_run_once(run_id=str(run_id), generation=int(generation), worker=me)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


def _enqueue_batch(runs: list[tuple[str, int]]) -> None:
    # One batch per combination queue: a worker only gets runs of combinations it runs.
    by_queue: dict[str, list[list[str | int]]] = {}
    for run_id, generation in runs:
        by_queue.setdefault(run_route(run_id=run_id).get("queue", ""), []).append([run_id, generation])
    for queue, batch in by_queue.items():
        advance_runs.apply_async_on_commit(args=(batch,), **({"queue": queue} if queue else {}))


SWEEP_TASK = "ratchet.sweep"
"""The registered name of :func:`sweep_expired_leases` (``runtime.project.celery`` sends it at start-up)."""

FOLLOW_UP_MARGIN_SECONDS = 0.05
"""A follow-up sweep runs this long after the lease it waits for expires (clock resolution)."""

FOLLOW_UP_MIN_SECONDS = 0.25
"""Follow-up sweeps of one chain are at least this far apart, so a chain stays short."""


@shared_task(name=SWEEP_TASK, acks_late=True, ignore_result=True,
             autoretry_for=CONNECTION_ERRORS, retry_backoff=True, max_retries=3)
def sweep_expired_leases(until: float | None = None, startup: bool = False) -> int:
    """Re-queue live runs whose lease expired or that nobody drives (``runtime.workers.sweeper``).

    Beat sends it every ``RATCHET_SWEEP_SECONDS`` seconds and every worker once at start-up
    (``runtime.project.celery``); runs free for that long count as idle. Each candidate gets its own
    ``advance_run`` message naming its current generation (beyond :data:`SWEEP_MESSAGES`
    candidates, batches of them go out as :func:`advance_runs` messages), so the runs of a dead
    worker spread over every free pool process at once, and a run that was merely slow (its own
    message still in flight) ends up with one chain, not two.

    Then it looks ahead (DESIGN.md section 5.7): if a live lease expires before the next
    periodic sweep, it schedules one more sweep just after that expiry. Such a follow-up carries
    ``until`` (a time.time() deadline: the next periodic sweep) and only schedules another
    before that deadline, so the extra sweeps per period are bounded and never pile up.

    Args:
        until: None from beat and at start-up; the chain's deadline (epoch seconds, this
            worker's clock, used only to decide when to look again) for a follow-up.
        startup: True for the sweep a starting worker sends: it also re-queues blocked runs at
            once (``RATCHET_BLOCKED_RETRY_SECONDS`` holds them back otherwise), because a
            restarted worker may have the plug-in they wait for.

    Returns:
        The number of runs re-queued.
    """
    candidates = runs_needing_recovery(
        idle_seconds=settings.RATCHET_SWEEP_SECONDS, limit=SWEEP_LIMIT,
        blocked_retry_seconds=None if startup else settings.RATCHET_BLOCKED_RETRY_SECONDS)
    for candidate in candidates:
        log.info("sweep: re-queueing run %s at generation %s (%s%s)", candidate.run_id,
                 candidate.generation, candidate.reason,
                 f", lease of {candidate.owner_worker}" if candidate.owner_worker else "")
    per_message = -(-len(candidates) // SWEEP_MESSAGES)
    if per_message <= 1:
        for candidate in candidates:
            _enqueue(candidate.run_id, candidate.generation)
    else:
        for start in range(0, len(candidates), per_message):
            _enqueue_batch([(c.run_id, c.generation)
                            for c in candidates[start:start + per_message]])
    _schedule_follow_up(until=until)
    return len(candidates)


def _schedule_follow_up(*, until: float | None) -> None:
    now = time.time()
    deadline = until if until is not None else now + settings.RATCHET_SWEEP_SECONDS
    if deadline - now <= FOLLOW_UP_MIN_SECONDS:
        return
    wait = lease_expiry_next(within_seconds=deadline - now)
    if wait is None:
        return
    countdown = max(wait + FOLLOW_UP_MARGIN_SECONDS, FOLLOW_UP_MIN_SECONDS)
    if now + countdown >= deadline:
        return  # the next periodic sweep is as soon
    log.info("sweep: next lease expires in %.2f s; sweeping again then", wait)
    # Expiring with the chain: a follow-up delivered late (no worker up) is not worth running.
    sweep_expired_leases.apply_async_on_commit(kwargs={"until": deadline}, countdown=countdown,
                                               expires=max(60.0, deadline - now + 30.0))


ARCHIVE_TASK = "ratchet.archive"
"""The registered name of :func:`archive_finished_runs` (beat sends it when retention is set)."""


@shared_task(name=ARCHIVE_TASK, acks_late=True, ignore_result=True,
             autoretry_for=CONNECTION_ERRORS, retry_backoff=True, max_retries=3)
def archive_finished_runs() -> int:
    """Archive finished runs older than ``RATCHET_ARCHIVE_AFTER_SECONDS`` in the phases
    ``RATCHET_ARCHIVE_PHASES``, at most ``RATCHET_ARCHIVE_BATCH`` per message
    (``runtime.archive.runs.archive_pass``; DESIGN.md section 4.11). Safe to deliver twice: an
    archived run is no longer a candidate, and each run is archived in one transaction.

    Returns:
        The number of runs archived (0 when no retention is configured).
    """
    if settings.RATCHET_ARCHIVE_AFTER_SECONDS is None:
        return 0
    outcome = archive_pass(selection=ArchiveSelection(
        older_than=settings.RATCHET_ARCHIVE_AFTER_SECONDS, phases=tuple(settings.RATCHET_ARCHIVE_PHASES),
        limit=settings.RATCHET_ARCHIVE_BATCH), apply=True)
    log.info("archive: %s", outcome.summary().replace("\n", "; "))
    return len(outcome.archived)
