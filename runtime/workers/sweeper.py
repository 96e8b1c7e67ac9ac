"""Find the runs that need a worker and have none (DESIGN.md section 4, Ownership; section 8).

A live run (phase ``running`` or ``pending``) normally has an ``advance_run`` message somewhere
between the broker and a worker. It can lose it: the worker was SIGKILLed with the message in
hand and the broker does not give it back (the embedded SQLite broker never does; Redis only
after its visibility timeout), a publish failed after a commit, or the run was created without
being enqueued. The database then shows one of two things, and the sweeper looks for both:

* **expired**: ``owner_worker`` is set but ``lease_expires_at <= Now()`` by the *database* clock
  (the only clock every worker shares): its holder died or stalled mid-step;
* **idle**: the lease is free and the row has not changed for ``idle_seconds``: nobody is
  driving the run. The idle threshold keeps the sweeper from doubling every healthy run that is
  merely between two tasks; a duplicate would be harmless (see ``runtime.workers.tasks``), only wasted.

Frozen phases (``awaiting_approval``, ``needs_review``) wait for a human and terminal phases are
done: never swept. Nor is a run whose newest trace event is ``recovery.failed`` or
``restore.refused`` (the same outside a recovery): its restore
failed closed (tampered or unmigratable checkpoint, missing high-water mark) and retrying every
sweep would change nothing; an operator fixes it and runs ``manage.py resume``, whose first
event clears the mark. The same goes for a run recovered ``max_recoveries`` times at one
generation without committing anything since: whatever kills its step is deterministic (a
poison run), and re-queueing it forever is the "retry blindly" DESIGN.md section 5 forbids.

A run whose newest event is ``run.blocked`` (a worker lacked its plug-in, DESIGN.md section 5.14)
is re-queued by every sweep a worker sends when it starts (a restarted worker may have the code
now) and otherwise only once the block is ``blocked_retry_seconds`` old, so a worker that still
lacks the code does not trace a block on every sweep.

How soon the sweeper looks (DESIGN.md section 5.7): a sweep runs when a worker starts and on
beat's period, and each of those asks :func:`lease_expiry_next` when the next live lease runs
out; if that is before the next periodic sweep, one more sweep is scheduled for that moment, so
a dead worker's runs are picked up as their leases expire, not up to a period later.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import timedelta

from django.db import models
from django.db.models import Exists, ExpressionWrapper, OuterRef, Q
from django.db.models.functions import Now

from runtime.models import Phase, Run, TraceEvent

LIVE_PHASES = (Phase.RUNNING, Phase.PENDING)
"""Phases in which a worker can make progress without a human."""

MAX_RECOVERIES_PER_GENERATION = 3
"""Recoveries at one generation after which the sweeper stops re-queueing a run."""


@dataclass(frozen=True)
class RecoveryCandidate:
    """A run the sweeper re-queues.

    Attributes:
        run_id: the run.
        generation: the committed generation when it was found (the task drops the message as
            stale if the run has moved on by the time it is delivered).
        reason: ``"expired"`` (a worker's lease ran out) or ``"idle"`` (lease free, nobody
            driving it).
        owner_worker: the worker whose lease expired (``""`` when idle).
    """

    run_id: str
    generation: int
    reason: str
    owner_worker: str


def runs_needing_recovery(*, idle_seconds: float = 0.0, limit: int | None = None,
                          max_recoveries: int = MAX_RECOVERIES_PER_GENERATION,
                          blocked_retry_seconds: float | None = None) -> list[RecoveryCandidate]:
    """Live runs whose lease expired, or is free and untouched for ``idle_seconds`` seconds.

    Both tests use the database clock (``Now()``), never this machine's. Oldest first, so a
    backlog is worked off in order.

    Args:
        idle_seconds: how long (seconds, >= 0) a run with a free lease must have gone without
            any change before it counts as nobody's; 0 means every free live run.
        limit: at most this many runs are considered (None: all).
        max_recoveries: leave out a run with this many ``recovery.succeeded`` events at its
            current generation (>= 1).
        blocked_retry_seconds: leave out a run whose newest event is a ``run.blocked`` younger
            than this (seconds, >= 0, by the database clock); None re-queues blocked runs at once
            (the sweep a starting worker sends).

    Raises:
        ValueError: ``idle_seconds`` is negative, ``limit`` or ``max_recoveries`` below 1.
    """
    if idle_seconds < 0:
        raise ValueError("idle_seconds must be >= 0")
    if limit is not None and limit < 1:
        raise ValueError("limit must be >= 1")
    if max_recoveries < 1:
        raise ValueError("max_recoveries must be >= 1")
    if blocked_retry_seconds is not None and blocked_retry_seconds < 0:
        raise ValueError("blocked_retry_seconds must be >= 0")
    idle_before = ExpressionWrapper(Now() - timedelta(seconds=idle_seconds),
                                    output_field=models.DateTimeField())
    expired = ~Q(owner_worker="") & (
        Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=Now())
    )
    idle = Q(owner_worker="") & Q(updated_at__lte=idle_before)
    failed_closed = Exists(TraceEvent.objects.filter(
        run_id=OuterRef("run_id"), seq=OuterRef("trace_seq"),
        event_type__in=("recovery.failed", "restore.refused")))
    rows = Run.objects.filter(expired | idle, phase__in=LIVE_PHASES).exclude(failed_closed)
    if blocked_retry_seconds is not None:
        blocked_since = ExpressionWrapper(Now() - timedelta(seconds=blocked_retry_seconds),
                                          output_field=models.DateTimeField())
        rows = rows.exclude(Exists(TraceEvent.objects.filter(
            run_id=OuterRef("run_id"), seq=OuterRef("trace_seq"), event_type="run.blocked",
            created_at__gt=blocked_since)))
    rows = (rows
            .order_by("updated_at", "run_id")
            .values_list("run_id", "generation", "owner_worker"))
    if limit is not None:
        rows = rows[:limit]
    candidates = [RecoveryCandidate(run_id=run_id, generation=generation,
                                    reason="idle" if not owner else "expired", owner_worker=owner)
                  for run_id, generation, owner in rows]
    if not candidates:
        return candidates
    recoveries: Counter[tuple[str, object]] = Counter(
        (run_id, payload.get("generation"))
        for run_id, payload in TraceEvent.objects.filter(
            run_id__in=[c.run_id for c in candidates], event_type="recovery.succeeded"
        ).values_list("run_id", "payload")
    )
    return [c for c in candidates if recoveries[(c.run_id, c.generation)] < max_recoveries]


def lease_expiry_next(*, within_seconds: float) -> float | None:
    """Seconds until the earliest lease of a live run expires, by the database clock.

    Only leases still running count (an expired one is already a candidate for the sweep that
    asks). The answer is used to schedule the next sweep, never to judge a lease: the sweep
    that then runs compares with ``Now()`` again.

    Args:
        within_seconds: look no further ahead than this (seconds, > 0).

    Returns:
        Seconds (>= 0) until that expiry, or None when no live lease expires within
        ``within_seconds``.

    Raises:
        ValueError: ``within_seconds`` is not positive.
    """
    if not within_seconds > 0:
        raise ValueError("within_seconds must be > 0")
    horizon = ExpressionWrapper(Now() + timedelta(seconds=within_seconds),
                                output_field=models.DateTimeField())
    row = (Run.objects.filter(phase__in=LIVE_PHASES, lease_expires_at__gt=Now(),
                              lease_expires_at__lte=horizon)
           .exclude(owner_worker="")
           .annotate(database_now=Now())
           .order_by("lease_expires_at")
           .values_list("lease_expires_at", "database_now")
           .first())
    if row is None:
        return None
    expires_at, now = row
    return max(0.0, (expires_at - now).total_seconds())


def runs_waiting(*, besides: str) -> bool:
    """Whether a live run other than ``besides`` has no worker right now (DESIGN.md section 5.7).

    Such a run has a message on its way, or the sweeper will find it: its lease is free, or
    expired by the database clock. A worker past its time slice asks this to decide whether to
    hand its run back so the waiting one gets the pool process. One indexed ``EXISTS`` read.
    """
    return (Run.objects.filter(phase__in=LIVE_PHASES)
            .filter(Q(owner_worker="") | Q(lease_expires_at__lte=Now()))
            .exclude(run_id=besides).exists())
