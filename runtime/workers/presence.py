"""Worker presence: each Celery worker's row saying it is alive (DESIGN.md section 5.15).

Celery finds its workers by broadcast (``inspect().ping()``), which kombu's SQLAlchemy transport,
the embedded default, does not have. So every worker writes a :class:`runtime.models.WorkerPresence`
row when it is ready and renews it every ``RATCHET_WORKER_PRESENCE_SECONDS`` from a daemon thread
of its main process, by the database clock (the one clock every process shares); it deletes the
row when it shuts down. A worker killed with SIGKILL cannot delete it: its row simply stops being
renewed and :func:`workers_present` leaves it out after ``STALE_PERIODS`` periods.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connections
from django.db.models.functions import Now

from runtime.models import WorkerPresence

log = logging.getLogger("runtime.workers.presence")

STALE_PERIODS = 3
"""A row not renewed for this many periods names a worker that is gone."""

_WRITING = threading.Lock()
"""Held by the presence thread while it writes, and by a fork of this process until it is done.

The Celery main process forks its pool processes while this thread may be inside a write. A
child forked then inherits the library's in-memory record of a lock its parent's thread held:
SQLite keeps such locks per process, so every connection the child opens on that database file
is refused (``database is locked``) for as long as it lives, while the parent, which released
the real lock, and every other process go on. (Found by the chaos campaign's broker restarts,
which make Celery replace pool processes; DESIGN.md section 8.8.) So a fork waits for a write
in flight, and the thread gives its connection back after every write."""


def _fork_after_in_child() -> None:
    global _WRITING  # noqa: PLW0603 - the child's copy is held by the fork: it starts unlocked
    _WRITING = threading.Lock()


os.register_at_fork(before=lambda: _WRITING.acquire(), after_in_parent=lambda: _WRITING.release(),
                    after_in_child=_fork_after_in_child)


@dataclass(frozen=True)
class PresentWorker:
    """A worker whose row is fresh: ``name``, ``pid``, ``queues`` it consumes and ``seen_at``
    (the database time of its last renewal)."""

    name: str
    pid: int
    queues: list[str]
    seen_at: datetime


def worker_presence_write(*, name: str, queues: list[str], pid: int | None = None) -> None:
    """Create or renew worker ``name``'s row with ``seen_at`` = the database's ``Now()``.

    Args:
        name: the worker's node name (at most 200 characters).
        queues: the queue names it consumes.
        pid: its main process id (default: this process).
    """
    pid = os.getpid() if pid is None else pid
    if WorkerPresence.objects.filter(name=name).update(pid=pid, queues=queues, seen_at=Now()):
        return
    try:
        WorkerPresence.objects.create(name=name, pid=pid, queues=queues)
    except IntegrityError:  # created by a twin between the two statements: renew it instead
        WorkerPresence.objects.filter(name=name).update(pid=pid, queues=queues, seen_at=Now())


def worker_presence_clear(*, name: str, pid: int | None = None) -> None:
    """Delete worker ``name``'s row if process ``pid`` (default: this one) wrote it last (a
    worker restarted under the same name keeps its own row)."""
    WorkerPresence.objects.filter(name=name, pid=os.getpid() if pid is None else pid).delete()


def workers_present(*, period_seconds: float | None = None) -> list[PresentWorker]:
    """Workers whose row was renewed within ``STALE_PERIODS`` periods, newest first (one query).

    Args:
        period_seconds: the renewal period (seconds; default ``RATCHET_WORKER_PRESENCE_SECONDS``).
    """
    period = settings.RATCHET_WORKER_PRESENCE_SECONDS if period_seconds is None else period_seconds
    rows = (WorkerPresence.objects.filter(seen_at__gt=Now() - timedelta(seconds=STALE_PERIODS * period))
            .order_by("-seen_at", "name")[:100])
    return [PresentWorker(name=r.name, pid=r.pid, queues=list(r.queues or []), seen_at=r.seen_at) for r in rows]


class PresenceBeat:
    """Renew one worker's row every ``period`` seconds from a daemon thread until :meth:`stop`.

    A failed renewal (the database briefly unreachable) is logged and tried again next period:
    presence is for people reading the Workers page and must never stop a worker.
    """

    def __init__(self, *, name: str, queues: list[str], period: float | None = None) -> None:
        self.name, self.queues = name, queues
        self.period = settings.RATCHET_WORKER_PRESENCE_SECONDS if period is None else period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ratchet-worker-presence", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing, delete the row and close the caller's connections (called once, at
        worker shutdown)."""
        self._stop.set()
        self._thread.join(self.period + 5)
        try:
            worker_presence_clear(name=self.name)
        except Exception:
            log.exception("worker %s: its presence row could not be deleted", self.name)
        finally:
            connections.close_all()

    def _run(self) -> None:
        while True:
            with _WRITING:
                try:
                    worker_presence_write(name=self.name, queues=self.queues)
                except Exception:
                    log.exception("worker %s: presence not renewed", self.name)
                finally:
                    connections.close_all()  # nothing open between writes (see _WRITING)
            if self._stop.wait(self.period):
                return
