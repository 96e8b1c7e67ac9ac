"""Driving a run: take the lease, restore, recover, and step until the run stops or freezes.

One step (:func:`run_step`) is one of: an operator's cancel, proposing the next write
(``runtime.engine.propose``), or executing / reconciling the pending one
(``runtime.engine.execute``); every step ends in a fenced checkpoint commit. A resume after a
worker died is a *recovery* and is traced as one (DESIGN.md section 8: recovery metrics).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import DatabaseError

from runtime.checkpoints.refusal_freeze import code_change_case_open, restore_refusal_freeze
from runtime.checkpoints.row_agreement import run_row_confirm
from runtime.checkpoints.session import RunSession, default_worker_id, session_open, session_release
from runtime.core.checkpoint import TERMINAL_PHASES, Phase, StopReason
from runtime.core.statemachine import Event
from runtime.core.tracing import run_scope, run_span, span, span_annotate, tracing_enabled
from runtime.engine.blocked import BLOCKING_ERRORS, run_block
from runtime.engine.cancel import cancel_requested, run_cancel
from runtime.engine.credentials import credentials_recheck
from runtime.engine.execute import pending_execute
from runtime.engine.freeze import run_freeze
from runtime.engine.propose import write_propose
from runtime.engine.recover import environment_recover, waiting_reconcile
from runtime.engine.spans import RecoveryTrace, step_attributes, step_outcome
from runtime.errors import (
    AdapterError,
    CheckpointError,
    CodeDigestMismatchError,
    EngineError,
    LeaseLostError,
    RunNotFoundError,
    SigningError,
    TraceChainError,
)
from runtime.evidence.trace import trace_append, trace_verify
from runtime.models import Run
from runtime.ownership.leases import Lease, lease_acquire_waiting, lease_release, lease_renew

logger = logging.getLogger(__name__)


@dataclass
class StepReport:
    """What one call of :func:`run_advance` did. ``steps`` counts committed checkpoints."""

    run_id: str
    phase: str
    stop_reason: str | None
    steps: int
    generation: int
    cursor: int
    recovered: bool = False
    events: list[str] = field(default_factory=list)
    stop_detail: str | None = None
    """What a person reads first about a freeze or failure (the adapter's refusal, the
    planner's error), or None."""


def run_advance(*, run_id: str, worker: str | None = None, max_steps: int | None = None,
                ttl_seconds: float | None = None, wait_seconds: float = 0.0,
                on_step: Callable[[StepReport], None] | None = None,
                reuse: Callable[..., RunSession | None] | None = None,
                keep_going: Callable[[RunSession], bool] | None = None,
                verify_trace: bool = False, held: RunSession | None = None,
                hold: Callable[[RunSession], bool] | None = None) -> StepReport:
    """Acquire the lease, restore, recover, and drive the run until it stops or ``max_steps``.

    Args:
        run_id: the run to drive.
        worker: this worker's id (defaults to ``runtime.checkpoints.session.default_worker_id``).
        max_steps: stop after this many committed steps (None: until the run stops or freezes).
        ttl_seconds: lease time to live in seconds (default ``RATCHET_LEASE_SECONDS``).
        wait_seconds: if another worker holds the lease, retry for up to this long (seconds).
        on_step: called after every committed step (progress bars).
        reuse: called as ``reuse(run_id=, worker=, lease=, ttl=, recovering=)`` once the lease is
            taken; it may return a session this process restored earlier and proved still to be
            the committed head under ``lease`` (the gateway's session cache, DESIGN.md section
            5.12), which then skips restore and recovery; None restores as usual.
        keep_going: asked before every step after the first; False ends the call with the lease
            released and the run still live (a worker's time slice, DESIGN.md section 5.7).
            The lease is renewed by the steps' own commits while it answers True.
        verify_trace: re-hash the run's whole trace and verify the whole receipts ledger before
            restoring (a person's resume; a recovery always does): an edited, inserted or
            deleted event fails closed with ``TraceChainError``, an edited ledger row with
            ``LedgerChainError`` (DESIGN.md section 4.15).
        held: a session whose lease this caller still holds since its last call ended (the
            gateway's warm session, DESIGN.md section 5.12): nothing is acquired, restored or
            recovered; the steps go on from its state, and every commit is fenced by its lease
            as always (a lease lost meanwhile fails the first commit with ``LeaseLostError``).
        hold: asked once the steps end with the lease still held; True leaves the lease with
            the caller (who releases it later, ``session_release``), False or None releases it.

    Returns:
        A :class:`StepReport`. A frozen run (needs_review, awaiting_approval) returns normally.

    Raises:
        RunNotFoundError, LeaseHeldError (after ``wait_seconds``), LeaseLostError /
        StaleGenerationError (another worker took over: stop), CheckpointError subclasses
        (restore failed closed: the run needs a human; the lease is released first, so the
        next attempt gets the same error rather than ``LeaseHeldError``), TraceChainError (the
        trace was edited; checked on a recovery and when ``verify_trace``). Each of these
        freezes the run row with one review case (``runtime.checkpoints.refusal_freeze``).

    Traced (when tracing is on) as a ``ratchet.run.advance`` span in the run's own trace, one
    ``ratchet.step`` span per step, and a ``ratchet.recovery`` span ending in error when the lease
    was taken over from a holder that died (DESIGN.md section 8.6).
    """
    worker = worker or default_worker_id()
    with run_scope(run_id), run_span("ratchet.run.advance", run_id=run_id,
                                     attributes={"ratchet.worker": worker}) as current:
        report = _run_advance(run_id=run_id, worker=worker, max_steps=max_steps, ttl_seconds=ttl_seconds,
                              wait_seconds=wait_seconds, on_step=on_step, reuse=reuse, keep_going=keep_going,
                              verify_trace=verify_trace, held=held, hold=hold)
        span_annotate(current, {"ratchet.generation": report.generation, "ratchet.phase": report.phase,
                                "ratchet.steps": report.steps, "ratchet.recovered": report.recovered,
                                "ratchet.stop_reason": report.stop_reason})
        return report


def _run_advance(*, run_id: str, worker: str, max_steps: int | None, ttl_seconds: float | None,
                 wait_seconds: float, on_step: Callable[[StepReport], None] | None,
                 reuse: Callable[..., RunSession | None] | None,
                 keep_going: Callable[[RunSession], bool] | None, verify_trace: bool,
                 held: RunSession | None, hold: Callable[[RunSession], bool] | None) -> StepReport:
    if held is not None:
        session, recovering = held, False
    else:
        acquired = _session_acquire(run_id=run_id, worker=worker, ttl_seconds=ttl_seconds,
                                    wait_seconds=wait_seconds, reuse=reuse, verify_trace=verify_trace)
        if isinstance(acquired, StepReport):
            return acquired
        session, recovering = acquired
    waiting_reconcile(session)
    # A planner driven from outside says when it has no call to propose (DESIGN.md section 5.12).
    halt = getattr(session.planner, "halt_before_step", None)
    while not (callable(halt) and halt(session)) and session.state.phase not in TERMINAL_PHASES and (
        session.state.phase not in (Phase.NEEDS_REVIEW, Phase.AWAITING_APPROVAL)
    ):
        if max_steps is not None and session.steps >= max_steps:
            break
        if keep_going is not None and session.steps and not keep_going(session):
            break
        run_step(session)
        if on_step:
            on_step(_report(session, recovering))
    if session.released or hold is None or not hold(session):
        session_release(session)  # unless the run's last commit did (runtime/checkpoints/session.py)
    return _report(session, recovering)


def _session_acquire(*, run_id: str, worker: str, ttl_seconds: float | None, wait_seconds: float,
                     reuse: Callable[..., RunSession | None] | None,
                     verify_trace: bool) -> tuple[RunSession, bool] | StepReport:
    """Take the lease, restore (or reuse) and recover: ``(session, recovering)``, or the report
    of a run whose row says it ended (confirmed against the signed checkpoint)."""
    ttl = ttl_seconds or settings.RATCHET_LEASE_SECONDS
    run = Run.objects.filter(run_id=run_id).first()
    if run is None:
        raise RunNotFoundError(run_id=run_id)
    if run.phase in TERMINAL_PHASES:
        # A finished row is an unsigned copy: confirmed against the signed checkpoint before it
        # is reported as the run's end (DESIGN.md section 4.10).
        run_row_confirm(run_id=run_id, worker=worker)
        return StepReport(run_id=run_id, phase=run.phase, stop_reason=run.stop_reason or None, steps=0,
                          generation=run.generation, cursor=-1)
    # A lease not released cleanly makes this a recovery; its recovery.started rides in the
    # acquisition's own transaction (DESIGN.md section 5.7).
    lease = lease_acquire_waiting(run_id=run_id, worker=worker, ttl_seconds=ttl, wait_seconds=wait_seconds,
                                  recovery_events=[("recovery.started", {"worker": worker})])
    recovering = bool(lease.previous_owner)
    recovery = RecoveryTrace(lease)
    started = time.monotonic()
    try:
        reused = reuse(run_id=run_id, worker=worker, lease=lease, ttl=ttl, recovering=recovering) if reuse else None
        # On a recovery or a person's resume, the whole receipts ledger, not only the tail this
        # process verified before: a worker keeps what it verified, so an edit behind it would
        # otherwise go unseen (DESIGN.md section 4.15).
        session = reused if reused is not None else session_open(run_id=run_id, worker=worker, lease=lease,
                                                                 ttl=ttl, full_ledger=recovering or verify_trace)
        if recovering or verify_trace:
            # The trace is evidence a person reads to decide; a resume on an edited one would
            # extend a chain nobody can trust any more (DESIGN.md section 4.15).
            trace_verify(run_id=run_id).raise_for_status(run_id=run_id)
        recovery.restored(session)
        if reused is None:
            credentials_recheck(session)  # DESIGN.md section 5.9: before anything executes
            environment_recover(session)
    except Exception as exc:
        # The release comes first: ``recovery.failed`` must stay the run's newest event, which
        # keeps the sweeper from re-queueing a run whose restore failed closed (runtime/workers/sweeper.py).
        _lease_give_back(lease)
        recovery.emit(error=exc)
        payload = {"error": type(exc).__name__, "message": str(exc)[:500],
                   "duration_seconds": round(time.monotonic() - started, 6)}
        if isinstance(exc, BLOCKING_ERRORS):
            # This worker lacks the run's code: the run is blocked, not broken, and a recovery
            # in progress stays undecided until a worker that has the code drives it
            # (runtime/engine/blocked.py).
            run_block(run_id=run_id, worker=worker, error=exc)
            if isinstance(exc, CodeDigestMismatchError):
                code_change_case_open(run_id=run_id, error=exc)
        elif isinstance(exc, CheckpointError | SigningError | TraceChainError):
            # A restore that fails closed needs a person: one review case, the row frozen with
            # the typed reason, and the refusal traced after the lease went back as the run's
            # newest event (recovery.failed in a recovery, restore.refused otherwise, which the
            # recovery metrics do not count), so the sweeper stops re-queueing the run
            # (runtime/checkpoints/refusal_freeze.py, DESIGN.md section 4.15).
            restore_refusal_freeze(run_id=run_id, error=exc, worker=worker, recovering=recovering,
                                   extra={"duration_seconds": payload["duration_seconds"]})
        elif recovering:
            trace_append(run_id=run_id, event_type="recovery.failed", payload=payload)
        raise
    recovery.emit()
    if recovering:
        trace_append(run_id=run_id, event_type="recovery.succeeded",
                     payload={"duration_seconds": round(time.monotonic() - started, 6),
                              "generation": session.generation, "phase": session.state.phase.value})
    return session, recovering


def _lease_give_back(lease: Lease) -> None:
    """Release ``lease`` after a restore or recovery that raised, so the next resume meets the
    same typed error at once instead of ``LeaseHeldError`` until the lease expires. Whatever a
    recovery committed before it raised is behind the mark, and the next holder restores from
    there. A lease someone else holds by now, or a database that cannot be reached, is left as
    it is (it expires; DESIGN.md section 4.5)."""
    try:
        lease_release(lease=lease)
    except (LeaseLostError, DatabaseError) as exc:
        logger.warning("run %s: lease not released after a failed restore: %s", lease.run_id,
                       type(exc).__name__)


def _report(session: RunSession, recovered: bool) -> StepReport:
    s = session.state
    return StepReport(run_id=session.run_id, phase=s.phase.value,
                      stop_reason=s.stop_reason.value if s.stop_reason else None, steps=session.steps,
                      generation=session.generation, cursor=s.cursor, recovered=recovered,
                      events=list(session.events), stop_detail=s.stop_detail or None)


def run_step(session: RunSession) -> None:
    """Renew the lease and take one step of a running or pending run.

    Raises:
        AdapterError: retryable adapter errors only (busy, unavailable); any other adapter error
            freezes the run for review (fail closed).
        EngineError: the run is in a phase that cannot be stepped.
        LeaseLostError / StaleGenerationError: another worker took over; stop.
    """
    # Every commit extends the lease in its fenced UPDATE (DESIGN.md section 4.3); a separate
    # renewal transaction is needed only when no commit did so within the last tenth of the TTL
    # (so a step still starts with at least 90% of its lease).
    if time.monotonic() - session.renewed_at > session.ttl / 10:
        session.lease = lease_renew(lease=session.lease, ttl_seconds=session.ttl)
        session.renewed_at = time.monotonic()
    phase = session.state.phase
    if not tracing_enabled():
        _step(session, phase)
        return
    with span("ratchet.step", attributes=step_attributes(session)) as current:
        _step(session, phase)
        span_annotate(current, step_outcome(session))


def _step(session: RunSession, phase: Phase) -> None:
    try:
        if cancel_requested(session):
            run_cancel(session)
        elif phase == Phase.RUNNING:
            write_propose(session)
        elif phase == Phase.PENDING:
            pending_execute(session)
        else:  # pragma: no cover - the loop only calls run_step in running/pending
            raise EngineError(f"cannot step a run in phase {phase}", run_id=session.run_id)
    except AdapterError as exc:
        if exc.retryable:
            raise  # busy or unavailable: the same step can succeed later (Celery retries)
        # The adapter refused for a reason a retry cannot fix (invalid action for this state, a
        # corrupt receipt store, an indeterminate write): fail closed, a human decides.
        refused = {"type": type(exc).__name__, "message": exc.message,
                   "action": session.proposing if session.state.pending is None else None}
        run_freeze(session, Event.ADAPTER_REFUSED, StopReason.ADAPTER_REFUSED, f"{type(exc).__name__}: {exc}",
                   extra={"adapter_error": refused})
