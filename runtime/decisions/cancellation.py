"""An operator's request to cancel a run (DESIGN.md section 5).

The request is recorded on the run row and traced; a live run is queued so the worker driving it
stops it at its next step (:func:`runtime.engine.cancel.run_cancel`, which settles a pending write
first), and a frozen run, which has no worker, is cancelled here under its lease by the same
settle-then-stop rule.
"""

from __future__ import annotations

from django.db import transaction

import runtime.workers.dispatch
from runtime.checkpoints.session import run_session
from runtime.core.checkpoint import TERMINAL_PHASES, Phase
from runtime.engine.cancel import run_cancel
from runtime.errors import RunNotFoundError
from runtime.evidence.trace import trace_append
from runtime.models import Run


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
