"""Lease heartbeats: keep a run's lease while one long adapter or model call runs (DESIGN.md section 4.9).

A step renews its lease when it starts and every commit extends it, but a single call (a slow
API, a model, a long command) can outlast the lease. :class:`LeaseHeartbeat` renews the lease by
the database clock every third of its time to live while the call runs, for at most
``max_seconds`` seconds (``RATCHET_MAX_CALL_SECONDS``): a call that hangs past the bound lets the
lease expire and another worker take over, as before. The renewals of every call in the process
run on one daemon thread (:class:`_Beater`), started once and idle between calls: most calls end
in milliseconds, before their first renewal is due, and starting a thread per call cost a write
more than the renewals it never made.

A renewal that fails (the lease expired or was taken over) stops the heartbeat and sets
:attr:`LeaseHeartbeat.lost`; callers that can cut a call short (a timeout, a subprocess) watch
it. Nothing else changes: the new holder's fencing token already fences the adapter, and the
slow worker's commit is refused by the commit's fence (sections 4.3 and 4.6).
"""

from __future__ import annotations

import logging
import os
import threading
import time
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
    """Renew ``lease`` on the process's heartbeat thread while a ``with`` block runs.

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
        self._started = 0.0

    def __enter__(self) -> LeaseHeartbeat:
        self._started = time.monotonic()
        # The first beat comes soon, since the step may have used up much of the lease already,
        # but not at once: most calls end within milliseconds and need no renewal at all.
        _beater().add(self, due=self._started + min(self._ttl / 3, FIRST_BEAT_SECONDS))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        # A renewal in flight is waited for (at most JOIN_SECONDS), so the lease the caller
        # keeps is the newest; past that it finishes on its own and can only extend this lease
        # while it is still ours.
        _beater().remove(self, wait_seconds=JOIN_SECONDS)

    def _beat(self) -> float | None:
        """One renewal, on the heartbeat thread; returns when the next is due (monotonic
        seconds), or None when this heartbeat stops (bound reached, lease lost)."""
        if time.monotonic() - self._started > self._max:
            log.warning("run %s: call exceeded %s s; the lease is left to expire", self.lease.run_id, self._max)
            return None
        try:
            self.lease = lease_renew(lease=self.lease, ttl_seconds=self._ttl)
            self.beats += 1
        except LeaseLostError:
            log.warning("run %s: heartbeat lost the lease (version %d)", self.lease.run_id,
                        self.lease.lease_version)
            self.lost.set()
            if self._on_lost is not None:
                self._on_lost()
            return None
        except Exception:  # a database hiccup: the next beat tries again within the TTL
            log.exception("run %s: heartbeat renewal failed", self.lease.run_id)
            close_old_connections()
        return time.monotonic() + self._ttl / 3


class _Beater:
    """The process's heartbeat thread: renews each registered :class:`LeaseHeartbeat` when it is
    due, one at a time, and closes its database connection whenever no call is registered."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[LeaseHeartbeat, float] = {}
        self._renewing: LeaseHeartbeat | None = None
        self._thread: threading.Thread | None = None

    def add(self, beat: LeaseHeartbeat, *, due: float) -> None:
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="lease-heartbeats", daemon=True)
                self._thread.start()
            self._due[beat] = due
            self._cond.notify_all()

    def remove(self, beat: LeaseHeartbeat, *, wait_seconds: float) -> None:
        deadline = time.monotonic() + wait_seconds
        with self._cond:
            self._due.pop(beat, None)
            while self._renewing is beat and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            self._cond.notify_all()

    def _next(self) -> LeaseHeartbeat:
        """Wait (holding the condition) until a registered heartbeat is due and return it."""
        while True:
            if not self._due:
                # Idle: give the connection back rather than hold one per worker process.
                self._cond.release()
                try:
                    connection.close()
                finally:
                    self._cond.acquire()
                if not self._due:
                    self._cond.wait()
                continue
            beat, due = min(self._due.items(), key=lambda item: item[1])
            now = time.monotonic()
            if due <= now:
                return beat
            self._cond.wait(due - now)

    def _run(self) -> None:
        while True:
            with self._cond:
                beat = self._next()
                self._renewing = beat
            following = None
            try:
                following = beat._beat()  # noqa: SLF001 - the beater is the heartbeat's own thread
            finally:
                with self._cond:
                    self._renewing = None
                    if beat in self._due:
                        if following is None:
                            del self._due[beat]
                        else:
                            self._due[beat] = following
                    self._cond.notify_all()


_BEATER: _Beater | None = None
_BEATER_LOCK = threading.Lock()


def _beater() -> _Beater:
    global _BEATER  # noqa: PLW0603 - one per process, made on first use
    with _BEATER_LOCK:
        if _BEATER is None:
            _BEATER = _Beater()
        return _BEATER


def _forget_beater() -> None:
    # A forked child (a Celery pool process) has no copy of the parent's thread, and the
    # parent's locks may have been held at the fork: it starts a heartbeat thread of its own.
    global _BEATER, _BEATER_LOCK  # noqa: PLW0603
    _BEATER, _BEATER_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_beater)
