"""Resume every orphaned run without Celery: ``manage.py resume --all-orphaned`` (DESIGN.md section 5.7).

An *orphan* is what the sweeper looks for (``runtime.workers.sweeper.runs_needing_recovery``): a live run
whose lease expired by the database clock (its worker died or stalled), or whose lease is free
and untouched for ``RATCHET_SWEEP_SECONDS`` (nobody drives it). Runs whose restore already failed
closed, and poison runs, are left out exactly as the sweeper leaves them out.

Each orphan is handed to exactly one driver: this process (``jobs=1``) or one of at most ``jobs``
child processes forked from it. Every driver takes the run's lease with the usual compare-and-set
(``runtime.engine.run_advance``) under its own worker id (``<id>:<pid>``), so a run that a Celery
worker or another ``resume`` took meanwhile is skipped (``lease-held``), and a driver that loses
the lease mid-run is stopped by the fence. A run that moved on to another generation between
the search and its turn is skipped too (``moved-on``): someone else is driving it.
"""

from __future__ import annotations

import logging
import os
import socket
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

from django.conf import settings
from django.db import connections

from runtime.engine import run_advance
from runtime.errors import LeaseHeldError, LeaseLostError, RatchetError, StaleGenerationError
from runtime.models import Run
from runtime.workers.sweeper import LIVE_PHASES, runs_needing_recovery

log = logging.getLogger("runtime.workers.orphans")

ERROR = "error"
"""The outcome of a run that could not be driven (a typed runtime error; ``detail`` says which)."""


@dataclass(frozen=True)
class OrphanOutcome:
    """What resuming one orphan did.

    Attributes:
        run_id: the run.
        outcome: the phase the run stopped in (``completed``, ``awaiting_approval``, ...), or
            ``lease-held`` / ``moved-on`` (someone else drives it: skipped), ``not-live`` (it
            stopped meanwhile), or :data:`ERROR`.
        detail: the error's class and message for :data:`ERROR`, else ``""``.
        recovered: the resume was a recovery (the previous lease was not released cleanly).
        worker: the worker id that drove it.
    """

    run_id: str
    outcome: str
    detail: str
    recovered: bool
    worker: str


def _worker_id(base: str | None) -> str:
    # One id per process: a lease is re-entrant for its holder, so two children sharing an id
    # could both believe they hold the same run (as runtime.workers.tasks.worker_id).
    return f"{base or settings.RATCHET_WORKER_ID or socket.gethostname()}:{os.getpid()}"


def orphan_resume(*, run_id: str, generation: int | None, worker: str | None = None
                  ) -> OrphanOutcome:
    """Drive one orphan until it stops or freezes, under this process's own lease.

    Args:
        run_id: the run.
        generation: the generation it was found at (None: any); a run found at another one is
            skipped as ``moved-on``.
        worker: base of the worker id (default ``RATCHET_WORKER_ID`` or the host name); the
            process id is appended.

    Returns:
        An :class:`OrphanOutcome`; typed runtime errors become :data:`ERROR` outcomes (they are
        logged; a restore that failed closed is traced as ``recovery.failed`` by the engine).
    """
    me = _worker_id(worker)
    row = Run.objects.filter(run_id=run_id).values("phase", "generation").first()
    if row is None or row["phase"] not in LIVE_PHASES:
        return OrphanOutcome(run_id=run_id, outcome="not-live", detail="", recovered=False, worker=me)
    if generation is not None and row["generation"] != generation:
        return OrphanOutcome(run_id=run_id, outcome="moved-on", detail="", recovered=False, worker=me)
    try:
        report = run_advance(run_id=run_id, worker=me)
    except LeaseHeldError:
        return OrphanOutcome(run_id=run_id, outcome="lease-held", detail="", recovered=False, worker=me)
    except (LeaseLostError, StaleGenerationError) as exc:
        log.warning("resume: run %s was taken over while %s drove it: %s", run_id, me, exc)
        return OrphanOutcome(run_id=run_id, outcome="moved-on", detail=str(exc), recovered=False,
                             worker=me)
    except RatchetError as exc:
        log.error("resume: run %s stopped on %s: %s", run_id, type(exc).__name__, exc)
        return OrphanOutcome(run_id=run_id, outcome=ERROR, detail=f"{type(exc).__name__}: {exc}",
                             recovered=False, worker=me)
    return OrphanOutcome(run_id=run_id, outcome=report.phase, detail="", recovered=report.recovered,
                         worker=me)


def _child_start() -> None:
    # A forked child must never use the parent's database connections (the parent closed them
    # before forking; this drops the wrappers' references so the child opens its own).
    for conn in connections.all():
        conn.connection = None


def orphans_resume_all(*, jobs: int = 1, idle_seconds: float | None = None, limit: int | None = None,
                       worker: str | None = None,
                       on_outcome: Callable[[OrphanOutcome], None] | None = None
                       ) -> list[OrphanOutcome]:
    """Find every orphan once and resume each exactly once; return the outcomes in search order.

    Args:
        jobs: drivers (>= 1): 1 drives the runs one after another in this process; more forks a
            pool of that many child processes (each run goes to exactly one of them).
        idle_seconds: how long a free lease must be untouched to count (seconds, >= 0; default
            ``RATCHET_SWEEP_SECONDS``).
        limit: at most this many orphans (oldest first; None: all).
        worker: base of the worker ids (see :func:`orphan_resume`).
        on_outcome: called with each outcome as it arrives (progress lines).

    Raises:
        ValueError: ``jobs`` below 1 (and as :func:`runtime.workers.sweeper.runs_needing_recovery`).
    """
    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    found = runs_needing_recovery(
        idle_seconds=settings.RATCHET_SWEEP_SECONDS if idle_seconds is None else idle_seconds,
        limit=limit)
    outcomes: list[OrphanOutcome] = []

    def take(outcome: OrphanOutcome) -> None:
        outcomes.append(outcome)
        if on_outcome:
            on_outcome(outcome)

    if jobs == 1 or len(found) <= 1:
        for candidate in found:
            take(orphan_resume(run_id=candidate.run_id, generation=candidate.generation,
                               worker=worker))
        return outcomes
    connections.close_all()  # nothing open may cross the fork
    with ProcessPoolExecutor(max_workers=min(jobs, len(found)), mp_context=get_context("fork"),
                             initializer=_child_start) as pool:
        futures = [pool.submit(orphan_resume, run_id=c.run_id, generation=c.generation,
                               worker=worker) for c in found]
        for future in futures:
            take(future.result())
    return outcomes


def orphans_summary(outcomes: list[OrphanOutcome]) -> str:
    """One line: how many orphans were resumed and how each ended (``3 completed, 1 error``)."""
    counts = Counter(o.outcome for o in outcomes)
    parts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
    return f"resumed {len(outcomes)} orphaned run(s)" + (f": {parts}" if parts else "")
