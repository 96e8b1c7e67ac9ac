"""The workers and queues page: who is working, what they consume, how deep the queue is
(DESIGN.md section 6.6).

Every probe is bounded: it runs in a helper thread and the page waits at most
``PROBE_SECONDS`` for it, so a broker that does not answer (a Redis host that drops packets, an
SQLite broker file locked by a writer) makes the page say "unknown", never hang. A probe left
running after its deadline finishes or times out on its own (each also has its own socket or
lock timeout); its answer is dropped.

* Live workers: Celery's ``inspect().ping()`` and ``active_queues()`` when the broker supports
  broadcast (Redis, AMQP); kombu's SQLAlchemy transport (the embedded default) has no broadcast,
  so there (and when the ping fails) the page reads the database instead: the workers whose
  presence row is fresh (:mod:`runtime.workers.presence`), then the owners of recent leases no
  such row accounts for (a worker of an older version, or one whose row could not be written).
* Queue depth: the SQLAlchemy broker's ``kombu_message`` rows still visible; Redis ``LLEN``; AMQP
  a passive ``queue_declare``; anything else unknown.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.db.models import Count, Max
from django.db.models.functions import Now

from review.queries.runs import LIVE_PHASES
from review.scope import scope_filter
from runtime.models import Phase, Run
from runtime.workers.presence import STALE_PERIODS, workers_present

PROBE_SECONDS = 1.0
"""The longest the page waits for one probe of the broker (seconds)."""

RECENT_LEASE_SECONDS = 600
"""A lease that expired less than this long ago (seconds) still names a live-looking worker."""

T = TypeVar("T")


class ProbeTimeout(Exception):
    """A probe did not answer within ``PROBE_SECONDS``."""


def _bounded(probe: Callable[[], T]) -> T:
    """``probe()``'s answer, or :class:`ProbeTimeout` after ``PROBE_SECONDS`` (the thread is left
    to finish on its own; it is a daemon, so it never keeps the process alive)."""
    seconds = PROBE_SECONDS
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = probe()
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc

    thread = threading.Thread(target=run, name="ratchet-broker-probe", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise ProbeTimeout(f"no answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


@dataclass(frozen=True)
class WorkerRow:
    """One worker: ``name``; ``source`` ("celery ping", "database heartbeat" or "recent
    leases"); ``queues`` it consumes (None: unknown); ``leased_runs`` it holds a current lease on
    (None: not read)."""

    name: str
    source: str
    queues: list[str] | None = None
    leased_runs: int | None = None


@dataclass(frozen=True)
class QueueRow:
    """One queue and its depth (None: unknown, with ``why``)."""

    name: str
    depth: int | None
    why: str = ""


@dataclass(frozen=True)
class WorkersView:
    """What the workers page shows.

    Attributes:
        broker: the broker's kind (``sqlalchemy``, ``redis``, ``amqp`` ...), never its URL (it
            may carry a password).
        workers: live workers; ``workers_source`` says how they were found, ``workers_note``
            why Celery was not asked or did not answer (``""`` when it did).
        queues: the task queue(s) and their depth.
    """

    broker: str
    workers: list[WorkerRow] = field(default_factory=list)
    workers_source: str = ""
    workers_note: str = ""
    queues: list[QueueRow] = field(default_factory=list)

    @property
    def presence_window(self) -> int:
        """Seconds within which a worker's heartbeat row must have been renewed to be listed."""
        return round(STALE_PERIODS * settings.RATCHET_WORKER_PRESENCE_SECONDS)


def _broker_kind(url: str) -> str:
    scheme = url.partition("://")[0].lower()
    if scheme.startswith(("sqla+", "sqlalchemy+")):
        return "sqlalchemy"
    if scheme in ("redis", "rediss"):
        return "redis"
    if scheme in ("amqp", "amqps", "pyamqp"):
        return "amqp"
    return scheme or "unknown"


def _lease_owners(user: Any) -> list[WorkerRow]:
    """Owners of current or recently expired leases on live runs of the tenants ``user`` may see
    (one grouped query over the ``(phase, lease_expires_at)`` index)."""
    phases = sorted(LIVE_PHASES | {Phase.AWAITING_APPROVAL.value})
    rows = (scope_filter(user=user, queryset=Run.objects.all())
            .filter(phase__in=phases, lease_expires_at__gt=Now() - timedelta(seconds=RECENT_LEASE_SECONDS))
            .exclude(owner_worker="").values("owner_worker")
            .annotate(n=Count("pk"), last=Max("lease_expires_at")).order_by("-last")[:100])
    return [WorkerRow(name=r["owner_worker"], source="recent leases", leased_runs=r["n"]) for r in rows]


def _database_workers(user: Any) -> list[WorkerRow]:
    """Workers with a fresh presence row (their current leases counted within the tenants
    ``user`` may see), then lease owners that belong to none of them."""
    present = workers_present()
    leases = _lease_owners(user)
    if not present:
        return leases
    live = dict(scope_filter(user=user, queryset=Run.objects.all())
                .filter(lease_expires_at__gt=Now()).exclude(owner_worker="")
                .values("owner_worker").annotate(n=Count("pk")).values_list("owner_worker", "n"))
    rows = []
    for worker in present:
        mine = [owner for owner in live if owner == worker.name or owner.startswith(f"{worker.name}:")]
        rows.append(WorkerRow(name=worker.name, source="database heartbeat", queues=worker.queues,
                              leased_runs=sum(live[owner] for owner in mine)))
    names = tuple(f"{w.name}:" for w in present)
    return rows + [row for row in leases
                   if not row.name.startswith(names) and row.name not in {w.name for w in present}]


def _celery_workers() -> list[WorkerRow]:
    from runtime.workers.dispatch import project_app

    app = project_app()

    inspector = app.control.inspect(timeout=PROBE_SECONDS / 2)
    replies = inspector.ping() or {}
    queues = inspector.active_queues() or {}
    return [WorkerRow(name=name, source="celery ping",
                      queues=sorted(q.get("name", "") for q in queues.get(name, [])) if name in queues else None)
            for name in sorted(replies)]


def _sqlite_depth(url: str, queue: str) -> int:
    path = unquote(urlsplit(url.split("+", 1)[1]).path)
    # sqlite:///relative and sqlite:////absolute: urlsplit keeps one leading slash too many.
    path = path[1:] if path.startswith("//") else path
    link = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=PROBE_SECONDS / 2)
    try:
        row = link.execute(
            "SELECT COUNT(*) FROM kombu_message m JOIN kombu_queue q ON q.id = m.queue_id "
            "WHERE q.name = ? AND m.visible = 1", (queue,)).fetchone()
    finally:
        link.close()
    return int(row[0])


def _redis_depth(url: str, queue: str) -> int:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=PROBE_SECONDS / 2,
                                  socket_connect_timeout=PROBE_SECONDS / 2)
    try:
        return int(client.llen(queue))
    finally:
        client.close()


def _amqp_depth(queue: str) -> int:
    from runtime.workers.dispatch import project_app

    app = project_app()

    with app.connection_for_read() as conn:
        conn.ensure_connection(max_retries=1, timeout=PROBE_SECONDS / 2)
        return int(conn.default_channel.queue_declare(queue=queue, passive=True).message_count)


def _queue_depth(kind: str, url: str, queue: str) -> QueueRow:
    probes: dict[str, Callable[[], int]] = {
        "sqlalchemy": lambda: _sqlite_depth(url, queue),
        "redis": lambda: _redis_depth(url, queue),
        "amqp": lambda: _amqp_depth(queue),
    }
    if kind == "sqlalchemy" and not url.split("+", 1)[1].startswith("sqlite:"):
        return QueueRow(queue, None, "only an SQLite file is read for the SQLAlchemy broker")
    probe = probes.get(kind)
    if probe is None:
        return QueueRow(queue, None, f"depth is not read from a {kind} broker")
    try:
        return QueueRow(queue, _bounded(probe))
    except ProbeTimeout as exc:
        return QueueRow(queue, None, f"the broker did not answer ({exc})")
    except sqlite3.OperationalError as exc:
        # A broker file no worker has created yet has no tables: nothing was ever queued.
        if "no such table" in str(exc):
            return QueueRow(queue, 0)
        return QueueRow(queue, None, f"the broker file could not be read ({type(exc).__name__})")
    except Exception as exc:  # a broker error of any library: the page says unknown, not 500
        return QueueRow(queue, None, f"the broker could not be read ({type(exc).__name__})")


def workers_view(*, user: Any) -> WorkersView:
    """Probe the broker and the runs table (each broker probe bounded by ``PROBE_SECONDS``).

    Args:
        user: the dashboard user; lease owners are read from the runs of the tenants they may see
            (DESIGN.md section 6.6). Celery's workers and the queue are shared by every tenant.
    """
    url = settings.CELERY_BROKER_URL
    kind = _broker_kind(url)
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    workers: list[WorkerRow] = []
    note = ""
    source = "database"
    if kind in ("redis", "amqp"):
        try:
            workers = _bounded(_celery_workers)
            source = "celery ping"
        except ProbeTimeout as exc:
            note = f"Celery did not answer ({exc})"
        except Exception as exc:
            note = f"Celery could not be asked ({type(exc).__name__})"
    else:
        note = f"the {kind} broker has no broadcast, so Celery cannot be pinged"
    if source != "celery ping":
        workers = _database_workers(user)
    return WorkersView(broker=kind, workers=workers, workers_source=source, workers_note=note,
                       queues=[_queue_depth(kind, url, queue)])
