"""The Celery application: ``celery -A runtime worker`` (STYLE.md rule 4: tasks carry only ids).

Configuration comes from the ``CELERY_*`` block of ``runtime/project/settings.py``. The tasks live in
``runtime/workers/tasks.py`` (``ratchet.advance_run``, ``ratchet.sweep``); the embedded default runs a
worker with the sweeper inside it through ``manage.py worker``. Every worker sweeps once when it
is ready and keeps its database connections across tasks (DESIGN.md section 5.7). In production run
``celery -A runtime worker`` on every machine and exactly one ``celery -A runtime beat``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from celery import Celery, bootsteps
from celery.signals import beat_init, task_postrun, worker_init, worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "runtime.project.settings")

app = Celery("runtime")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The tasks live in ``runtime/workers/tasks.py`` and ``review/notifications/tasks.py``, not in an
# app's top-level ``tasks`` module.
app.autodiscover_tasks(packages=["runtime.workers", "review.notifications"])

# Celery's Django fixup closes every database connection before and after each task unless this
# is set; then it only recycles them every this many tasks, and ``_reuse_connections`` below
# closes a connection earlier when Django says it is unusable or older than CONN_MAX_AGE.
app.conf["CELERY_DB_REUSE_MAX"] = 1000



class BrokerPolling(bootsteps.StartStopStep):
    """Poll a polling broker (kombu's SQLAlchemy transport) every ``RATCHET_BROKER_POLL_SECONDS``.

    kombu's virtual transports sleep ``polling_interval`` seconds (default 1.0) whenever the
    queue is empty *or* the worker's prefetch slots are full, so with acks late and prefetch 1 a
    pool process that finishes a task waits up to a second for its next message (DESIGN.md
    section 5.7). The SQLAlchemy transport hands every transport option to
    ``sqlalchemy.create_engine()``, which refuses ``polling_interval``; this consumer step sets
    it on the consumer's transport instead, each time the consumer (re)connects. Brokers that
    push (Redis, RabbitMQ) are left alone.
    """

    requires = ("celery.worker.consumer.connection:Connection",)

    def start(self, parent: Any) -> None:
        from django.conf import settings

        transport = parent.connection.transport
        if getattr(transport, "driver_type", "") == "sql":
            transport.polling_interval = settings.RATCHET_BROKER_POLL_SECONDS


app.steps["consumer"].add(BrokerPolling)

STARTUP_SWEEP_TASK = "ratchet.sweep"
"""Sent once when a worker is ready (``runtime.workers.tasks.SWEEP_TASK``, addressed by name: the task
module imports the engine, this one must not)."""


def _forget_inherited_broker_engines() -> None:
    """Give a freshly forked process (pool process, embedded beat) its own SQLite broker links.

    kombu's SQLAlchemy transport caches engines, and their pooled connections, on a class. A
    process forked after the parent connected would share the parent's SQLite connection, which
    SQLite forbids; the embedded beat even closes every inherited descriptor first, and then
    never manages to publish a sweep. ``dispose(close=False)`` drops the inherited pool without
    touching the parent's connections; the next publish opens fresh ones.
    """
    transport = sys.modules.get("kombu.transport.sqlalchemy")
    if transport is None:
        return
    engines = transport.Channel._engines
    for engine, _session in list(engines.values()):
        engine.dispose(close=False)
    engines.clear()


os.register_at_fork(after_in_child=_forget_inherited_broker_engines)


@worker_init.connect
@beat_init.connect
def _prepare_sqlalchemy_broker(**_: Any) -> None:
    """Create the SQLAlchemy broker's tables and queue row once, before anything forks.

    On a fresh broker file the consumer, the embedded beat and the pool processes would all
    create kombu's tables at the same moment; the loser gets "database is locked", and kombu's
    reconnect then leaves beat publishing on a dead channel for good (no sweep ever runs).
    Declaring the queue here, retrying while another process holds the lock, avoids the race.
    """
    from django.conf import settings

    url = settings.CELERY_BROKER_URL
    if not url.split("://", 1)[0].lower().startswith(("sqla+", "sqlalchemy+")):
        return
    from kombu.exceptions import OperationalError as BrokerError
    from sqlalchemy.exc import DBAPIError

    for attempt in range(1, 11):
        try:
            with app.connection_for_write() as conn:
                conn.default_channel.queue_declare(queue=settings.CELERY_TASK_DEFAULT_QUEUE,
                                                   durable=True, auto_delete=False)
            return
        except (DBAPIError, BrokerError):
            # Locked by a process doing the same right now, or the queue row was inserted by
            # it first: look again shortly. Still failing after ~5 s is a real problem: raise.
            if attempt == 10:
                raise
            time.sleep(0.1 * attempt)


@worker_init.connect
def _persistent_worker_connections(**_: Any) -> None:
    """Keep each worker process's database connections open across tasks (DESIGN.md section 5.7).

    Runs in the worker's main process before the pool forks, so every pool process inherits the
    setting (and the Django fixup closes the inherited connections themselves in each child: a
    SQLite or PostgreSQL connection must never be shared across a fork). Web and CLI processes
    keep the configured ``CONN_MAX_AGE``; only workers, which run task after task, reuse
    connections for ``RATCHET_WORKER_CONN_MAX_AGE`` seconds.
    """
    from django.conf import settings
    from django.db import connections

    for alias in settings.DATABASES:
        settings.DATABASES[alias]["CONN_MAX_AGE"] = settings.RATCHET_WORKER_CONN_MAX_AGE
        connections[alias].settings_dict["CONN_MAX_AGE"] = settings.RATCHET_WORKER_CONN_MAX_AGE


@task_postrun.connect
def _reuse_connections(**_: Any) -> None:
    """After each task, close only connections Django finds broken or older than CONN_MAX_AGE
    (what it does at the end of a web request), instead of every connection every time."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        conn.close_if_unusable_or_obsolete()


@worker_ready.connect
def _sweep_at_startup(**_: Any) -> None:
    """Sweep once as soon as this worker can take messages (DESIGN.md section 5.7).

    A worker starting after another died finds that worker's runs at once instead of after
    beat's first period (beat's first sweep comes one period after beat starts). Harmless when
    several workers start together: every message the sweep sends is safe to deliver twice. A
    broker that refuses the message is logged; beat's next sweep does the same work.
    """
    try:
        app.send_task(STARTUP_SWEEP_TASK, kwargs={"startup": True}, ignore_result=True)
    except Exception:  # a start-up nicety must never keep the worker from running
        logging.getLogger("runtime.project.celery").exception("start-up sweep could not be sent")


_presence: list[Any] = []
"""This worker's presence beat (``runtime.workers.presence.PresenceBeat``), once ready."""


@worker_ready.connect
def _presence_start(sender: Any = None, **_: Any) -> None:
    """Write this worker's presence row and keep renewing it (DESIGN.md section 5.15): brokers
    without broadcast cannot answer Celery's ping, so the Workers page reads this row instead.
    Named as its pool processes' lease identities start (``RATCHET_WORKER_ID`` or the hostname)."""
    from django.conf import settings

    from runtime.workers.presence import PresenceBeat

    try:
        name = settings.RATCHET_WORKER_ID or getattr(sender, "hostname", "") or "celery"
        consumer = getattr(sender, "task_consumer", None)
        queues = sorted(q.name for q in getattr(consumer, "queues", []) or [])
        beat = PresenceBeat(name=name, queues=queues)
        beat.start()
        _presence.append(beat)
    except Exception:  # a page's nicety must never keep the worker from running
        logging.getLogger("runtime.project.celery").exception("worker presence could not start")


@worker_shutdown.connect
def _presence_stop(**_: Any) -> None:
    """Delete this worker's presence row as it shuts down (a SIGKILLed worker's row goes stale)."""
    while _presence:
        _presence.pop().stop()
