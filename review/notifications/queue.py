"""Handing notification work to Celery by task name (DESIGN.md section 6.10; STYLE.md rule 4).

Messages carry only ids. Publishing goes by name through the current Celery app, so the modules
that record events never import the task module (which imports them). A broker that cannot be
reached is logged and left to the periodic sweep, which finds every due delivery again: a
notification outage never reaches the run that caused the event.
"""

from __future__ import annotations

import logging

from celery import current_app

log = logging.getLogger(__name__)

DELIVER_TASK = "ratchet.notify_deliver"
INGEST_TASK = "ratchet.notify_ingest"
SWEEP_TASK = "ratchet.notify_sweep"


def _send(name: str, args: list[object], countdown: float | None = None) -> bool:
    try:
        current_app.send_task(name, args=args, countdown=countdown)
    except Exception:  # the broker is down or misconfigured: the sweep retries later
        log.exception("could not publish %s; the notification sweep will pick it up", name)
        return False
    return True


def deliveries_enqueue(*, delivery_ids: list[int], countdown: float | None = None) -> None:
    """Ask a worker to attempt each delivery (after ``countdown`` seconds, when given)."""
    for delivery_id in delivery_ids:
        _send(DELIVER_TASK, [delivery_id], countdown)


def trace_event_enqueue(*, run_id: str, seq: int) -> None:
    """Ask a worker to record the notification trace event ``(run_id, seq)`` stands for."""
    _send(INGEST_TASK, [run_id, seq])
