"""The gateway's restored sessions, kept per run between calls (DESIGN.md section 5.12).

Restoring a run for every call (parse the spec, check plug-in pins, open and bind the adapter,
load and verify the checkpoint and its ledger, re-observe the environment and raise its fence)
is most of a gateway call's cost. Between two calls of one run through this process nothing
else may have touched the run, so the session the last call ended with is still the run:
:func:`session_reuse` hands it back to ``run_advance`` instead of a fresh restore when, under
the lease just taken,

* the lease is this process's previous lease plus one: nobody else held the run (or any run
  on its environment) in between, so no other writer ran and nothing needs recovery;
* the run row's state version and the high-water mark's generation are the ones the session
  last committed (one read of the HWM store): no commit happened elsewhere, and a main
  database restored from a backup is not mistaken for the head.

Anything else -- another holder, a recovery, a newer or older head, a call that raised -- falls
back to the full restore. Nothing is trusted beyond that: every commit is still fenced by the
lease and compare-and-sets the HWM, and the adapter is re-bound to the new fencing token.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from django.conf import settings

from runtime.checkpoints.high_water_marks import hwm_read
from runtime.checkpoints.session import RunSession
from runtime.ownership.leases import Lease

_KEPT = 256
_kept: OrderedDict[str, RunSession] = OrderedDict()
_lock = threading.Lock()


def sessions_enabled() -> bool:
    """``RATCHET_GATEWAY_REUSE_SESSIONS`` (default on): whether the gateway keeps sessions."""
    return bool(getattr(settings, "RATCHET_GATEWAY_REUSE_SESSIONS", True))


def session_keep(session: RunSession | None) -> None:
    """Keep ``session`` after a call that ended normally (its lease released, its state committed).

    A session with writes still staged for a commit is not kept; of two sessions of one run the
    one with the newer lease stays.
    """
    if session is None or session.within_commit or not sessions_enabled():
        return
    with _lock:
        found = _kept.get(session.run_id)
        if found is not None and found.lease.lease_version > session.lease.lease_version:
            return
        _kept[session.run_id] = session
        _kept.move_to_end(session.run_id)
        while len(_kept) > _KEPT:
            _kept.popitem(last=False)


def session_forget(*, run_id: str) -> None:
    """Drop the kept session of ``run_id`` (a call that raised may have left it half changed)."""
    with _lock:
        _kept.pop(run_id, None)


def session_reuse(*, run_id: str, worker: str, lease: Lease, ttl: float, recovering: bool,
                  **_: Any) -> RunSession | None:
    """The kept session of ``run_id`` made current for ``lease``, or None to restore as usual.

    A ``reuse`` hook of ``run_advance``. The kept session is taken out: one call at a time works
    on it, and a call that fails leaves nothing behind.

    Raises:
        HighWaterMarkMissingError: the HWM store cannot be read (fail closed, as a restore would).
    """
    with _lock:
        kept = _kept.pop(run_id, None)
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
    kept.steps, kept.events, kept.last_tick, kept.renewed_at = 0, [], now, now
    kept.released = False  # the lease just taken is this call's to give back
    return kept
