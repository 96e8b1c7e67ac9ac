"""The gateway's run sessions, kept per run between calls: warm, or only restored (DESIGN.md section 5.12).

Restoring a run for every call (parse the spec, check plug-in pins, open and bind the adapter,
load and verify the checkpoint and its ledger, re-observe the environment and raise its fence)
is most of a gateway call's cost, and taking and giving back the lease is two more durable
transactions. So a call that leaves its run running keeps the session **warm**: the lease stays
with this process, a keeper thread renews it (a heartbeat, every third of the lease's time to
live) while calls keep coming, and gives it back once the run's calls pause for
``RATCHET_GATEWAY_IDLE_SECONDS`` or the process has held it for ``RATCHET_GATEWAY_HOLD_SECONDS``
(so another process that wants the run -- a person's ``resume``, another gateway process -- gets
it within that bound). The next call takes the warm session and goes on from its state: nothing
is acquired, restored or recovered, because nobody else could have written while this process
held the lease. Every commit is still fenced by that lease, so a lease lost meanwhile (a stalled
process whose lease expired) fails the first commit, never writes twice.

A session whose lease went back is still kept **restored**: :func:`session_reuse` hands it to
``run_advance`` instead of a fresh restore when, under the lease just taken,

* the lease is this process's previous lease plus one: nobody else held the run (or any run
  on its environment) in between, so no other writer ran and nothing needs recovery;
* the run row's state version and the high-water mark's generation are the ones the session
  last committed (one read of the HWM store): no commit happened elsewhere, and a main
  database restored from a backup is not mistaken for the head.

One call at a time works on a run's session: :func:`session_take` marks the run busy in this
process (a second call of the same run waits for the first here, not on the database's lease),
and :func:`session_put` gives it back. A call that raised leaves nothing behind.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections

from runtime.checkpoints.high_water_marks import hwm_read
from runtime.checkpoints.session import RunSession, session_release
from runtime.core.checkpoint import Phase
from runtime.errors import GatewayRunBusyError, LeaseLostError
from runtime.ownership.leases import Lease, lease_renew

logger = logging.getLogger("runtime.gateway.sessions")

_KEPT = 256


@dataclass
class Kept:
    """A run's session kept between calls.

    Attributes:
        session: the session as the last call left it.
        warm: its lease is still held by this process (the keeper renews and releases it).
        idle_at: ``time.monotonic()`` at which the keeper gives the lease back.
        held_since: ``time.monotonic()`` when this process took the lease it holds.
    """

    session: RunSession
    warm: bool
    idle_at: float = 0.0
    held_since: float = 0.0


_kept: OrderedDict[str, Kept] = OrderedDict()
_busy: set[str] = set()
_changed = threading.Condition()
_keeper: threading.Thread | None = None


def sessions_enabled() -> bool:
    """``RATCHET_GATEWAY_REUSE_SESSIONS`` (default on): whether the gateway keeps sessions."""
    return bool(getattr(settings, "RATCHET_GATEWAY_REUSE_SESSIONS", True))


def idle_seconds() -> float:
    """``RATCHET_GATEWAY_IDLE_SECONDS``: how long a warm session's lease outlives the run's last
    call (seconds; 0: never warm, every call takes and gives back the lease)."""
    return float(getattr(settings, "RATCHET_GATEWAY_IDLE_SECONDS", 1.0))


def hold_seconds() -> float:
    """``RATCHET_GATEWAY_HOLD_SECONDS``: the longest this process keeps one lease warm (seconds)."""
    return float(getattr(settings, "RATCHET_GATEWAY_HOLD_SECONDS", 15.0))


def session_take(*, run_id: str, wait_seconds: float) -> Kept | None:
    """Mark ``run_id`` busy in this process and take its kept session out, if any.

    Waits up to ``wait_seconds`` seconds while another call (or the keeper) of this process
    works on the run. Every take that returns must be followed by :func:`session_put`.

    Raises:
        GatewayRunBusyError: another call of this process still works on the run (retryable).
    """
    deadline = time.monotonic() + wait_seconds
    with _changed:
        while run_id in _busy:
            left = deadline - time.monotonic()
            if left <= 0:
                raise GatewayRunBusyError("another call of this run is still in progress", run_id=run_id)
            _changed.wait(left)
        _busy.add(run_id)
        return _kept.pop(run_id, None)


def session_put(*, run_id: str, session: RunSession | None, warm: bool, held_since: float = 0.0) -> None:
    """End the call's use of ``run_id``: keep ``session`` (warm: its lease still held) or nothing.

    A session with writes still staged for a commit is not kept (its lease, when warm, is given
    back); of two sessions of one run the one with the newer lease stays.
    """
    if session is not None and (session.within_commit or not sessions_enabled()):
        if warm:
            _give_back(session)
        session, warm = None, False
    with _changed:
        _busy.discard(run_id)
        if session is not None:
            found = _kept.get(run_id)
            if found is None or found.session.lease.lease_version <= session.lease.lease_version:
                now = time.monotonic()
                _kept[run_id] = Kept(session=session, warm=warm, idle_at=now + idle_seconds(),
                                     held_since=held_since or now)
                _kept.move_to_end(run_id)
            while len(_kept) > _KEPT:
                _, dropped = _kept.popitem(last=False)
                if dropped.warm:
                    _give_back(dropped.session)
        _changed.notify_all()
        if warm:
            _keeper_start()


def session_forget(*, run_id: str) -> None:
    """Drop the kept session of ``run_id`` (a call that raised may have left it half changed)."""
    with _changed:
        found = _kept.pop(run_id, None)
    if found is not None and found.warm:
        _give_back(found.session)


def session_may_stay_warm(session: RunSession, *, held_since: float) -> bool:
    """Whether the call that ends with ``session`` keeps its lease: warm sessions are on, the run
    goes on running (a run that waits for a person, froze or ended gives the lease back at
    once, so a decision never waits for the gateway), nothing is staged for a commit, no mark is
    pending, and the lease has not been held for ``RATCHET_GATEWAY_HOLD_SECONDS`` yet."""
    return (sessions_enabled() and idle_seconds() > 0 and not session.released
            and session.state.phase == Phase.RUNNING and not session.within_commit
            and not session.mark_pending and time.monotonic() - held_since < hold_seconds())


def session_warm_ready(kept: Kept) -> bool:
    """Whether a warm session's lease can carry a call: renewed within half its time to live (the
    keeper renews every third); otherwise it is renewed now (one transaction). False: the lease
    is gone (the session is then of no use; the caller restores)."""
    session = kept.session
    if time.monotonic() - session.renewed_at < session.ttl / 2:
        return True
    try:
        session.lease = lease_renew(lease=session.lease, ttl_seconds=session.ttl)
    except (LeaseLostError, DatabaseError) as exc:
        logger.info("run %s: the warm lease is gone (%s); restoring", session.run_id, type(exc).__name__)
        return False
    session.renewed_at = time.monotonic()
    return True


def session_reuse(*, run_id: str, worker: str, lease: Lease, ttl: float, recovering: bool,
                  kept: RunSession | None = None, **_: Any) -> RunSession | None:
    """``kept`` (the restored session :func:`session_take` returned) made current for ``lease``,
    or None to restore as usual.

    A ``reuse`` hook of ``run_advance`` (bind ``kept`` with ``functools.partial``).

    Raises:
        HighWaterMarkMissingError: the HWM store cannot be read (fail closed, as a restore would).
    """
    if kept is None or recovering:
        return None
    rebind = getattr(kept.adapter, "with_fencing_token", None)
    if (rebind is None or lease.lease_version != kept.lease.lease_version + 1
            or lease.state_version != kept.lease.state_version):
        return None
    if hwm_read(run=kept.run).generation != kept.generation:
        return None
    now = time.monotonic()
    kept.worker, kept.lease, kept.ttl = worker, lease, ttl
    kept.adapter = rebind(lease.lease_version)
    session_begin_call(kept)
    kept.last_tick, kept.renewed_at = now, now
    kept.released = False  # the lease just taken is this call's to give back
    return kept


def session_begin_call(session: RunSession) -> None:
    """Reset what a call reports (steps and events of this call only)."""
    session.steps, session.events = 0, []


def sessions_release_all() -> None:
    """Give back every warm lease of this process (at exit, so the next process need not wait
    for the leases to expire)."""
    with _changed:
        warm = [found.session for found in _kept.values() if found.warm]
        _kept.clear()
    for session in warm:
        _give_back(session)


def sessions_drop_all() -> None:
    """Forget every kept session without touching the database (a test's database is gone by
    the time it ends; its rows, leases included, go with it)."""
    with _changed:
        _kept.clear()
        _busy.clear()
        _changed.notify_all()


def _give_back(session: RunSession) -> None:
    try:
        session_release(session)
    except (LeaseLostError, DatabaseError) as exc:
        # Lost or unreachable: it expires by the database clock (DESIGN.md section 4.5).
        logger.info("run %s: warm lease not given back: %s", session.run_id, type(exc).__name__)


def _keeper_start() -> None:
    global _keeper
    if _keeper is None or not _keeper.is_alive():
        _keeper = threading.Thread(target=_keep, name="gateway-session-keeper", daemon=True)
        _keeper.start()


def _keep() -> None:
    """The keeper: renews warm leases every third of their time to live and gives them back
    once idle or held too long; ends when no session is warm."""
    try:
        while True:
            with _changed:
                warm = [(run_id, found) for run_id, found in _kept.items() if found.warm]
                if not warm:
                    return
                now = time.monotonic()
                due = [run_id for run_id, found in warm if run_id not in _busy and (
                    now >= found.idle_at or now - found.held_since >= hold_seconds()
                    or now - found.session.renewed_at >= found.session.ttl / 3)]
                for run_id in due:
                    _busy.add(run_id)
                wake = min(min(found.idle_at, found.held_since + hold_seconds(),
                               found.session.renewed_at + found.session.ttl / 3) for _, found in warm)
            for run_id in due:
                _keep_one(run_id)
            with _changed:
                if not due:
                    _changed.wait(max(0.01, min(wake - time.monotonic(), 1.0)))
    finally:
        connections.close_all()


def _keep_one(run_id: str) -> None:
    with _changed:
        found = _kept.pop(run_id, None)
    session = found.session if found is not None else None
    keep: Kept | None = found
    try:
        if found is None or not found.warm:
            return
        now = time.monotonic()
        if now >= found.idle_at or now - found.held_since >= hold_seconds():
            _give_back(found.session)
            found.warm = False  # still restored: the next call may reuse it under a new lease
        else:
            try:
                session.lease = lease_renew(lease=session.lease, ttl_seconds=session.ttl)  # type: ignore[union-attr]
                session.renewed_at = time.monotonic()  # type: ignore[union-attr]
            except (LeaseLostError, DatabaseError) as exc:
                logger.info("run %s: warm lease lost (%s)", run_id, type(exc).__name__)
                keep = None
    except Exception:  # the keeper must outlive one run's failure; that lease then expires
        logger.exception("run %s: the gateway's session keeper failed on it", run_id)
        keep = None
    finally:
        with _changed:
            _busy.discard(run_id)
            if keep is not None and run_id not in _kept:
                _kept[run_id] = keep
            _changed.notify_all()


atexit.register(sessions_release_all)
