"""The Celery application: ``celery -A runtime worker`` (house style: tasks carry only ids).

Configuration comes from the ``CELERY_*`` block of ``runtime/settings.py``. The tasks live in
``runtime/tasks.py`` (``ratchet.advance_run``, ``ratchet.sweep``); the embedded default runs a
worker with the sweeper inside it through ``manage.py worker``. In production run
``celery -A runtime worker`` on every machine and exactly one ``celery -A runtime beat``.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from celery import Celery
from celery.signals import beat_init, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "runtime.settings")

app = Celery("runtime")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


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
