"""The engine's side of a cancel: settle a pending write first (query the adapter by key), then stop.

The operator's request (:func:`runtime.decisions.cancellation.run_request_cancel`) marks the run;
the worker driving it, or the request itself for a frozen run, calls :func:`run_cancel`.

A cancel never leaves a write half-known (DESIGN.md section 5): a pending write the adapter holds
a receipt for is reconciled before the run stops, one it has no receipt for never happened and
is dropped. A run frozen for review keeps its pending write, receipt and open case as evidence.
"""

from __future__ import annotations

from django.db import router

from runtime.checkpoints.session import RunSession
from runtime.core.checkpoint import Phase, StopReason
from runtime.core.statemachine import Event
from runtime.database.statements import compiled_rows
from runtime.engine.freeze import run_stop
from runtime.engine.settle import receipt_settle
from runtime.models import Run


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
            receipt_settle(session, receipt, reconciled=True, fold=False)  # a cancel proposes nothing
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
