"""Celery tasks: drive runs a few steps at a time, and re-queue runs whose worker died.

``ratchet.advance_run(run_id, generation=None)`` drives one run for up to
``RATCHET_STEPS_PER_TASK`` committed steps (``runtime.engine.run_advance``) and, while the run
is still live, enqueues itself again, so many runs interleave across any number of workers.
``ratchet.sweep`` (beat, every ``RATCHET_SWEEP_SECONDS``) re-queues the runs the database says
nobody is driving (``runtime.sweeper``).

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
re-queueing the run once a recovery of it has failed (``runtime.sweeper``).
Follow-up messages are published on commit (``transaction.on_commit``) so a worker never sees a
run before the transaction that made it ready is visible.
"""

from __future__ import annotations

import logging
import os
import socket
import threading

from celery import Task, shared_task
from django.conf import settings
from django.db import InterfaceError, transaction
from django.db import OperationalError as DatabaseOperationalError
from kombu.exceptions import OperationalError as BrokerOperationalError

from runtime.engine import run_advance
from runtime.errors import (
    CheckpointError,
    LeaseHeldError,
    LeaseLostError,
    RatchetError,
    SigningError,
    StaleGenerationError,
)
from runtime.models import Run
from runtime.sweeper import LIVE_PHASES, runs_needing_recovery

log = logging.getLogger("runtime.tasks")

SWEEP_LIMIT = 1000
"""Most runs one sweep re-queues; a larger backlog is worked off over the next sweeps."""


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


@shared_task(bind=True, name="ratchet.advance_run", acks_late=True, ignore_result=True,
             autoretry_for=CONNECTION_ERRORS, retry_backoff=True, retry_backoff_max=60,
             retry_jitter=True, max_retries=5)
def advance_run(self: Task, run_id: str, generation: int | None = None) -> str:
    """Drive ``run_id`` for up to ``RATCHET_STEPS_PER_TASK`` steps; re-enqueue while it is live.

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


def advance_run_once(*, run_id: str, generation: int | None, worker: str) -> str:
    """The body of :func:`advance_run`, callable without a broker (see its docstring)."""
    row = Run.objects.filter(run_id=run_id).values("phase", "generation").first()
    if row is None:
        log.error("advance_run: run %s does not exist; dropping the message", run_id)
        return "unknown-run"
    if row["phase"] not in LIVE_PHASES:
        # Terminal, or frozen for a human: the approval/decision service re-enqueues it.
        log.info("advance_run: run %s is %s; nothing to do", run_id, row["phase"])
        return "not-live"
    if generation is not None and row["generation"] != generation:
        log.info("advance_run: run %s is at generation %s, the message expected %s: an outdated "
                 "duplicate; dropping it", run_id, row["generation"], generation)
        return "stale"
    try:
        report = run_advance(run_id=run_id, worker=worker,
                             max_steps=settings.RATCHET_STEPS_PER_TASK)
    except LeaseHeldError as exc:
        log.info("advance_run: run %s is held by %s; dropping the message (the sweeper re-queues "
                 "the run if that lease expires)", run_id, exc.context.get("holder", "?"))
        return "lease-held"
    except (LeaseLostError, StaleGenerationError) as exc:
        log.warning("advance_run: run %s was taken over while %s drove it; stopping: %s",
                    run_id, worker, exc)
        return "superseded"
    except (CheckpointError, SigningError) as exc:
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
    advance_run.apply_async_on_commit(args=(run_id, generation))


def run_enqueue(*, run_id: str) -> None:
    """Queue ``run_id`` for a worker once the caller's transaction commits (house style 4).

    For services that make a run live again (an approval, a reviewer's replan) or create one:
    call it inside the transaction that changed the run, so no worker can see the message
    before the change; a rolled-back transaction publishes nothing. Outside a transaction it
    publishes at once. The message expects no particular generation, so it is never dropped as
    outdated; a duplicate of it is still harmless (the lease, then the generation check of the
    next hop).

    A broker outage at commit time does not undo or fail the caller's committed change: it is
    logged (Django's ``django.db.backends.base`` logger) and the sweeper picks the run up as
    idle within ``RATCHET_SWEEP_SECONDS``. Raises nothing itself.
    """

    def publish_advance_run() -> None:
        advance_run.delay(run_id)

    transaction.on_commit(publish_advance_run, robust=True)


@shared_task(name="ratchet.sweep", acks_late=True, ignore_result=True,
             autoretry_for=CONNECTION_ERRORS, retry_backoff=True, max_retries=3)
def sweep_expired_leases() -> int:
    """Re-queue live runs whose lease expired or that nobody drives (``runtime.sweeper``).

    Beat sends it every ``RATCHET_SWEEP_SECONDS`` seconds; runs free for that long count as
    idle. Each candidate gets an ``advance_run`` message naming its current generation, so a
    run that was merely slow (its own message still in flight) ends up with one chain, not two.

    Returns:
        The number of runs re-queued.
    """
    candidates = runs_needing_recovery(idle_seconds=settings.RATCHET_SWEEP_SECONDS,
                                       limit=SWEEP_LIMIT)
    for candidate in candidates:
        log.info("sweep: re-queueing run %s at generation %s (%s%s)", candidate.run_id,
                 candidate.generation, candidate.reason,
                 f", lease of {candidate.owner_worker}" if candidate.owner_worker else "")
        _enqueue(candidate.run_id, candidate.generation)
    return len(candidates)

