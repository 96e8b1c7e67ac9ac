"""Run leases: who may advance a run, judged by the database clock (DESIGN.md section 4, Ownership).

A lease is four columns on the ``Run`` row: ``owner_worker``, ``lease_version``,
``lease_expires_at`` and ``state_version``. Every change is a compare-and-set ``UPDATE`` whose
``WHERE`` holds the expected old values and compares expiry with the database's ``Now()``, never
with this machine's clock: workers on several machines disagree about the time, the database is the
one clock they share. A rowcount other than one means someone else got there first and becomes a
typed error (STYLE.md rule 1).

``lease_version`` grows on *every* acquisition, including a worker re-taking its own lease. It is
the fencing token, and it comes from the environment's one counter
(:func:`runtime.ownership.environments.environment_fence_next_txn`, advanced in the same transaction), so a
new lease on any run acting on an environment holds a newer token than every earlier one there
(DESIGN.md section 4.6): adapters reject tokens older than the newest they have seen, and
``checkpoint_commit`` refuses a commit whose token is no longer current.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.db import models, router, transaction
from django.db.models import ExpressionWrapper, Q
from django.db.models.functions import Now

from runtime.database.statements import compiled_rows
from runtime.errors import LeaseHeldError, LeaseLostError, RunNotFoundError
from runtime.evidence.trace import trace_append_txn
from runtime.models import Run
from runtime.ownership.environments import environment_fence_next_txn

logger = logging.getLogger("runtime.ownership.leases")


@dataclass(frozen=True)
class Lease:
    """A worker's claim on a run.

    Attributes:
        run_id: the run.
        worker: the worker id holding the lease.
        lease_version: the fencing token; strictly increases with every acquisition.
        state_version: the run's ``state_version`` this holder expects; it advances with every
            committed checkpoint (``checkpoint_commit`` returns the updated lease).
        expires_at: expiry (aware UTC datetime) as computed by the database clock.
        previous_owner: who held the run's lease when this one was acquired ("" when it was
            released cleanly): non-empty means that holder died or stalled, and this
            acquisition starts a recovery (DESIGN.md section 5.7).
    """

    run_id: str
    worker: str
    lease_version: int
    state_version: int
    expires_at: datetime
    previous_owner: str = ""


def _expiry(ttl_seconds: float) -> ExpressionWrapper:
    if not ttl_seconds > 0:
        raise ValueError("ttl_seconds must be > 0")
    return ExpressionWrapper(
        Now() + timedelta(seconds=ttl_seconds), output_field=models.DateTimeField()
    )


def held_by(lease: Lease) -> Q:
    """Filter matching the run row only while ``lease`` is current and unexpired by the DB clock.

    Shared by the lease functions and the commit protocol so the fence has exactly one definition.
    """
    return Q(
        run_id=lease.run_id,
        owner_worker=lease.worker,
        lease_version=lease.lease_version,
        lease_expires_at__gt=Now(),
    )


def _lost(lease: Lease, action: str) -> LeaseLostError:
    """Say *why* the fence failed: operators need to tell a takeover from an expiry."""
    row = Run.objects.filter(run_id=lease.run_id).values("owner_worker", "lease_version").first()
    if row is None:
        return LeaseLostError(f"cannot {action}: the run does not exist", run_id=lease.run_id)
    if row["lease_version"] != lease.lease_version or row["owner_worker"] != lease.worker:
        reason = f"cannot {action}: the lease was taken over (now version {row['lease_version']})"
    else:
        reason = f"cannot {action}: the lease expired by the database clock"
    return LeaseLostError(
        reason, run_id=lease.run_id, worker=lease.worker, lease_version=lease.lease_version
    )


def lease_acquire(*, run_id: str, worker: str, ttl_seconds: float,
                  recovery_events: Sequence[tuple[str, dict[str, Any]]] = ()) -> Lease:
    """Take the run's lease for ``worker`` for ``ttl_seconds`` seconds (database clock).

    Succeeds when the lease is free, expired by the database clock, or already held by
    ``worker``; in every case ``lease_version`` becomes the environment's next fencing token
    (DESIGN.md section 4.6), so a restarted worker fences off its own previous incarnation and
    every earlier writer on the environment. Records a ``lease.acquired`` trace event in the
    same transaction.

    Args:
        run_id: the run.
        worker: non-empty worker id.
        ttl_seconds: lease duration in seconds, > 0.
        recovery_events: trace events ``(event_type, payload)`` appended in the same transaction
            when the lease was not released cleanly (a previous owner is recorded): the engine's
            ``recovery.started``, so a recovery costs no transaction of its own.

    Raises:
        RunNotFoundError: no such run.
        LeaseHeldError: another worker holds an unexpired lease (retryable later).
        ValueError: empty worker or non-positive ttl.
    """
    if not worker:
        raise ValueError("worker must be a non-empty worker id")
    expiry = _expiry(ttl_seconds)
    with transaction.atomic():
        before = (
            Run.objects.select_for_update()
            .filter(run_id=run_id)
            .values("owner_worker", "lease_version", "state_version", "environment_instance_id")
            .first()
        )
        if before is None:
            raise RunNotFoundError(run_id=run_id)
        # A refused attempt below rolls this advance back with the transaction.
        token = environment_fence_next_txn(run_id=run_id, instance_id=before["environment_instance_id"],
                                           floor=before["lease_version"])
        takeable = (
            Q(owner_worker="")
            | Q(owner_worker=worker)
            | Q(lease_expires_at__isnull=True)
            | Q(lease_expires_at__lte=Now())
        )
        updated = Run.objects.filter(takeable, run_id=run_id).update(
            owner_worker=worker,
            lease_version=token,
            lease_expires_at=expiry,
            updated_at=Now(),
        )
        if updated != 1:
            raise LeaseHeldError(run_id=run_id, holder=before["owner_worker"], worker=worker)
        row = (
            Run.objects.filter(run_id=run_id)
            .values("lease_version", "state_version", "lease_expires_at")
            .get()
        )
        trace_append_txn(
            run_id=run_id,
            event_type="lease.acquired",
            payload={
                "worker": worker,
                "lease_version": row["lease_version"],
                "previous_owner": before["owner_worker"],
                "ttl_seconds": ttl_seconds,
            },
        )
        if before["owner_worker"]:
            for event_type, payload in recovery_events:
                trace_append_txn(run_id=run_id, event_type=event_type, payload=payload)
    if before["owner_worker"] and before["owner_worker"] != worker:
        logger.info(
            "run %s: worker %s took over the expired lease of %s (lease version %d)",
            run_id,
            worker,
            before["owner_worker"],
            row["lease_version"],
        )
    return Lease(
        run_id=run_id,
        worker=worker,
        lease_version=row["lease_version"],
        state_version=row["state_version"],
        expires_at=row["lease_expires_at"],
        previous_owner=before["owner_worker"],
    )


def lease_acquire_waiting(*, run_id: str, worker: str, ttl_seconds: float, wait_seconds: float,
                          recovery_events: Sequence[tuple[str, dict[str, Any]]] = ()) -> Lease:
    """:func:`lease_acquire`, retried every 0.25 s for up to ``wait_seconds`` seconds while another
    worker holds the lease (a service call that arrives mid-step waits for the step to end).

    Raises:
        LeaseHeldError: still held by another worker after ``wait_seconds`` seconds.
        RunNotFoundError / ValueError: as :func:`lease_acquire`.
    """
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return lease_acquire(run_id=run_id, worker=worker, ttl_seconds=ttl_seconds,
                                 recovery_events=recovery_events)
        except LeaseHeldError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))


def lease_renew(*, lease: Lease, ttl_seconds: float) -> Lease:
    """Extend a held lease to ``ttl_seconds`` seconds from now (database clock).

    The fencing token does not change. An expired lease cannot be renewed even if nobody took it
    over: between expiry and renewal another worker could have acquired and released it.

    Raises:
        LeaseLostError: the lease is no longer held by this worker/version, or has expired.
        ValueError: non-positive ttl.
    """
    expiry = _expiry(ttl_seconds)
    with transaction.atomic():
        updated = Run.objects.filter(held_by(lease)).update(
            lease_expires_at=expiry, updated_at=Now()
        )
        if updated != 1:
            raise _lost(lease, "renew the lease")
        expires_at = (
            Run.objects.filter(run_id=lease.run_id).values_list("lease_expires_at", flat=True).get()
        )
    return replace(lease, expires_at=expires_at)


def lease_release(*, lease: Lease) -> None:
    """Give the lease up so another worker can take it at once.

    ``lease_version`` is kept (it only ever grows). Releasing an expired lease that nobody took
    over is allowed: it changes nothing another worker relies on.

    Raises:
        LeaseLostError: another worker (or a newer acquisition) holds the lease now.
    """
    with transaction.atomic():
        updated = Run.objects.filter(
            run_id=lease.run_id, owner_worker=lease.worker, lease_version=lease.lease_version
        ).update(owner_worker="", lease_expires_at=None, updated_at=Now())
        if updated != 1:
            raise _lost(lease, "release the lease")
        trace_append_txn(
            run_id=lease.run_id,
            event_type="lease.released",
            payload={"worker": lease.worker, "lease_version": lease.lease_version},
        )


def lease_check(*, lease: Lease) -> None:
    """Confirm ``lease`` is still current and unexpired by the database clock.

    The engine calls this before every adapter call (DESIGN.md section 4). It is a read, so it
    narrows but cannot close the window in which the lease might expire; the adapter's fencing
    token check and the commit's compare-and-set close it.

    Raises:
        LeaseLostError: owner or lease version differ, or the lease expired.
    """
    # Compiled once per process: the engine reads this before every adapter call.
    held = compiled_rows(
        alias=router.db_for_read(Run), shape=("lease_check",),
        build=lambda s: Run.objects.filter(held_by(replace(lease, run_id=s["run_id"], worker=s["worker"],
                                                           lease_version=s["lease_version"]))
                                           ).values_list("pk")[:1],
        slots={"run_id": lease.run_id, "worker": lease.worker, "lease_version": lease.lease_version})
    if not held:
        raise _lost(lease, "continue")
