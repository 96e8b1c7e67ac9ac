"""The notification Celery tasks (DESIGN.md section 6.10; STYLE.md rule 4: messages carry ids).

``ratchet.notify_ingest`` records the notification of one trace event; ``ratchet.notify_deliver``
makes one attempt of one delivery and, when it failed, publishes the next attempt with the
backoff as countdown; ``ratchet.notify_sweep`` (Celery beat, every
``RATCHET_NOTIFY_SWEEP_SECONDS``) records what a lost message missed, announces approvals about
to expire and re-publishes every due delivery. None of them touches a run.
"""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from review.notifications.delivery import deliveries_due, delivery_attempt
from review.notifications.events import approvals_expiring_record, notification_from_trace, notifications_catch_up
from review.notifications.queue import DELIVER_TASK, INGEST_TASK, SWEEP_TASK, deliveries_enqueue


@shared_task(name=INGEST_TASK, acks_late=True, ignore_result=True)
def notify_ingest(run_id: str, seq: int) -> bool:
    """Record the notification of trace event ``(run_id, seq)``; True when one was recorded."""
    return notification_from_trace(run_id=run_id, seq=seq) is not None


@shared_task(name=DELIVER_TASK, acks_late=True, ignore_result=True)
def notify_deliver(delivery_id: int) -> str:
    """Attempt delivery ``delivery_id`` once; publish the retry after its backoff."""
    result = delivery_attempt(delivery_id=delivery_id)
    if result is None:
        return "skipped"
    if result.retry_in is not None:
        deliveries_enqueue(delivery_ids=[delivery_id], countdown=result.retry_in)
    return result.status


@shared_task(name=SWEEP_TASK, acks_late=True, ignore_result=True)
def notify_sweep() -> dict[str, int]:
    """Catch up on missed trace events of the last three sweep periods (at least ten minutes),
    record expiring approvals, publish every due delivery; returns the three counts."""
    window = max(600.0, 3 * settings.RATCHET_NOTIFY_SWEEP_SECONDS)
    missed = notifications_catch_up(since=timezone.now() - timedelta(seconds=window))
    expiring = approvals_expiring_record()
    due = deliveries_due()
    deliveries_enqueue(delivery_ids=due)
    return {"missed": missed, "expiring": expiring, "due": len(due)}
