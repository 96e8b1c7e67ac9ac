"""Wiring the notifications into the runtime without the runtime importing this app (DESIGN.md
section 6.10): a trace listener and a ``/metrics`` collector, registered when the app loads.

The listener runs inside the run's commit transaction, so it only filters by event type and asks,
once that transaction commits, for the event to be recorded by a worker. A rolled-back commit
sends nothing (STYLE.md rule 4); a lost message is found by the sweep.
"""

from __future__ import annotations

from django.db import transaction

from review.models import NotificationEndpoint
from review.notifications.events import WATCHED
from review.notifications.outbox import OutboxCollector
from review.notifications.queue import trace_event_enqueue
from runtime.evidence.listeners import AppendedEvent, trace_listener_register
from runtime.observability.collectors import collector_register


def _after_commit(run_id: str, seq: int) -> None:
    # Read after the commit, never inside the run's transaction: an error there (a missing table
    # on PostgreSQL) would abort the run's commit. With nobody subscribed there is nothing to send.
    if NotificationEndpoint.objects.filter(enabled=True).exists():
        trace_event_enqueue(run_id=run_id, seq=seq)


def on_trace_event(event: AppendedEvent) -> None:
    """The trace listener: a watched event is queued for recording after the commit."""
    if event.event_type in WATCHED:
        run_id, seq = event.run_id, event.seq
        transaction.on_commit(lambda: _after_commit(run_id, seq), robust=True)


def notifications_wire() -> None:
    """Register the listener and the collector (idempotent; called from ``ReviewConfig.ready``)."""
    trace_listener_register(listener=on_trace_event)
    collector_register(collector=OutboxCollector())
