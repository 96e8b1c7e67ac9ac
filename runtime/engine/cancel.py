"""Operator cancel: settle a pending write first (query the adapter by key), then stop.

A cancel never leaves a write half-known (DESIGN.md section 5): a pending write the adapter holds
a receipt for is reconciled before the run stops, one it has no receipt for never happened and
is dropped. A run frozen for review keeps its pending write, receipt and open case as evidence.
"""

from __future__ import annotations

from django.db import router, transaction

import runtime.workers.dispatch
from runtime.checkpoints.statements import compiled_rows
from runtime.core.checkpoint import TERMINAL_PHASES, Phase, StopReason
from runtime.core.statemachine import Event
from runtime.engine.freeze import run_stop
from runtime.engine.settle import receipt_settle
from runtime.errors import RunNotFoundError
from runtime.models import Run
from runtime.checkpoints.session import RunSession, run_session
from runtime.evidence.trace import trace_append


def run_request_cancel(*, run_id: str, requested_by: str) -> str:
    """Ask a run to stop; returns the run's phase afterwards.

    A live run (running, pending) is cancelled by the worker driving it, which first settles any
    pending write by querying the adapter with its key; the run is queued so a worker picks the
    request up. A frozen run (awaiting approval, needs review) has no worker, so it is cancelled
    here, under its lease, by the same settle-then-stop rule. Finished runs are left as they are.

    Raises:
        RunNotFoundError: unknown run.
        LeaseHeldError: a frozen run is being changed by someone else right now; try again.
    """
    with transaction.atomic():
        current = Run.objects.select_for_update().filter(run_id=run_id).values_list("phase", flat=True).first()
        if current is None:
            raise RunNotFoundError(run_id=run_id)
        if current in {p.value for p in TERMINAL_PHASES}:
            return current  # finished runs have nothing to cancel; nothing is recorded
        Run.objects.filter(run_id=run_id).update(cancel_requested=True)
        trace_append(run_id=run_id, event_type="run.cancel_requested", payload={"requested_by": requested_by})
    phase = Run.objects.values_list("phase", flat=True).get(run_id=run_id)
    if phase in (Phase.AWAITING_APPROVAL.value, Phase.NEEDS_REVIEW.value):
        with run_session(run_id=run_id, worker=f"cancel:{requested_by}") as session:
            if session.state.phase in (Phase.AWAITING_APPROVAL, Phase.NEEDS_REVIEW):
                run_cancel(session)
            return session.state.phase.value
    if phase in (Phase.RUNNING.value, Phase.PENDING.value):
        # Looked up on the module at call time, so stories can record the hand-off instead.
        runtime.workers.dispatch.run_enqueue(run_id=run_id)
    return phase


def cancel_requested(session: RunSession) -> bool:
    """Whether an operator asked this run to stop (read from the database, not the checkpoint)."""
    # Compiled once per process: read before every step.
    return bool(compiled_rows(
        alias=router.db_for_read(Run), shape=("cancel_requested",),
        build=lambda s: Run.objects.filter(run_id=s["run_id"], cancel_requested=True).values_list("pk")[:1],
        slots={"run_id": session.run_id}))


def run_cancel(session: RunSession) -> None:
    """Operator cancel: settle a pending write first (query by key), then stop without new effects.

    Raises:
        AdapterError: the adapter cannot be queried.
        LeaseLostError / StaleGenerationError: from the commit; another worker took over.
    """
    state = session.state
    if state.phase == Phase.NEEDS_REVIEW:
        # The pending write, the receipt and the open case are the evidence: keep all of them.
        run_stop(session, Event.CANCEL, StopReason.CANCELLED, "cancelled by an operator while frozen for review",
                 "run.cancelled", {"kept_pending": state.pending is not None})
        return
    if state.pending is not None:
        receipt = session.adapter.lookup_receipt(state.pending.idempotency_key)
        if receipt is not None:
            receipt_settle(session, receipt, reconciled=True)
            if state.phase != Phase.RUNNING:
                return
        else:
            # The adapter has no receipt for the key, so the write never happened: drop it.
            dropped = state.pending.model_dump(mode="json")
            state.pending = None
            run_stop(session, Event.CANCEL, StopReason.CANCELLED, "cancelled by an operator before the write ran",
                     "run.cancelled", {"dropped_pending": dropped})
            return
    run_stop(session, Event.CANCEL, StopReason.CANCELLED, "cancelled by an operator", "run.cancelled")
