"""Lease heartbeats: keep a run's lease while one long adapter or model call runs (DESIGN.md section 4.9).

A step renews its lease when it starts and every commit extends it, but a single call (a slow
API, a model, a long command) can outlast the lease. :class:`LeaseHeartbeat` is a daemon thread
in the worker process that renews the lease by the database clock every third of its time to
live while the call runs, for at most ``max_seconds`` seconds (``RATCHET_MAX_CALL_SECONDS``): a
call that hangs past the bound lets the lease expire and another worker take over, as before.

A renewal that fails (the lease expired or was taken over) stops the heartbeat and sets
:attr:`LeaseHeartbeat.lost`; callers that can cut a call short (a timeout, a subprocess) watch
it. Nothing else changes: the new holder's fencing token already fences the adapter, and the
slow worker's commit is refused by the commit's fence (sections 4.3 and 4.6).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType

from django.db import close_old_connections, connection

from runtime.errors import LeaseLostError
from runtime.ownership.leases import Lease, lease_renew

log = logging.getLogger("runtime.ownership.heartbeats")

FIRST_BEAT_SECONDS = 0.5
"""Seconds into a call before the first renewal (later ones: every third of the lease's TTL)."""
JOIN_SECONDS = 5.0
"""Seconds the end of a call waits for a renewal in flight."""


class LeaseHeartbeat:
    """Renew ``lease`` in a background thread while a ``with`` block runs.

    Args:
        lease: the held lease.
        ttl_seconds: each renewal extends the lease to this many seconds from now (DB clock), > 0.
        max_seconds: renew for at most this many seconds after the block starts, > 0.
        on_lost: called once from the heartbeat thread when a renewal fails (e.g. to cancel a
            call); must not raise.

    Attributes:
        lease: the newest lease (its expiry moves with each renewal; its token never changes).
        lost: set when a renewal failed: the lease is gone and this worker must not write.
        beats: renewals that succeeded.

    Raises:
        ValueError: a non-positive ``ttl_seconds`` or ``max_seconds``.
    """

    def __init__(self, lease: Lease, *, ttl_seconds: float, max_seconds: float,
                 on_lost: Callable[[], None] | None = None) -> None:
        if not ttl_seconds > 0 or not max_seconds > 0:
            raise ValueError("ttl_seconds and max_seconds must be > 0")
        self.lease = lease
        self.lost = threading.Event()
        self.beats = 0
        self._ttl = ttl_seconds
        self._max = max_seconds
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-heartbeat-{lease.run_id}", daemon=True)

    def __enter__(self) -> LeaseHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        # A renewal in flight finishes on its own (a daemon thread; it can only extend this
        # lease while it is still ours); the caller does not wait behind a slow database.
        self._thread.join(timeout=JOIN_SECONDS)

    def _run(self) -> None:
        interval = self._ttl / 3
        waited = 0.0  # seconds since the call started, in whole waits
        # The first beat comes soon, since the step may have used up much of the lease already,
        # but not at once: most calls end within milliseconds and need no renewal at all.
        wait = min(interval, FIRST_BEAT_SECONDS)
        try:
            while not self._stop.wait(wait):
                waited += wait
                wait = interval
                if waited > self._max:
                    log.warning("run %s: call exceeded %s s; the lease is left to expire", self.lease.run_id, self._max)
                    return
                try:
                    self.lease = lease_renew(lease=self.lease, ttl_seconds=self._ttl)
                    self.beats += 1
                except LeaseLostError:
                    log.warning("run %s: heartbeat lost the lease (version %d)", self.lease.run_id,
                                self.lease.lease_version)
                    self.lost.set()
                    if self._on_lost is not None:
                        self._on_lost()
                    return
                except Exception:  # a database hiccup: the next beat tries again within the TTL
                    log.exception("run %s: heartbeat renewal failed", self.lease.run_id)
                    close_old_connections()
        finally:
            connection.close()  # this thread's own connection
