"""Which trace events are worth telling people about, recorded once each (DESIGN.md section 6.10).

A trace event becomes a ``NotificationEvent`` keyed by ``trace:<run>:<seq>`` (unique), so the
listener's message, a redelivered message and the periodic sweep all record it at most once.
Expiring approvals have no trace event of their own: the sweep finds them from the committed
checkpoints and keys them by run, idempotency key and expiry.

Mapping: ``approval.requested`` is *approval waiting*; ``approval.expired`` *approval expired*;
``review.opened`` is *review case opened* when the reason is a conflict between what the run
intended and what a receipt says (a reviewer must choose a side) and *run frozen* otherwise (drift,
an unknown outcome, a refusing adapter or planner, a verifier without a verdict); the events
that end a run as failed (``run.failed``, ``run.policy_violation``, ``run.budget_exhausted``,
``review.aborted``, ``approval.denied``) are *run failed*.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from review.models import DeliveryStatus, NotificationDelivery, NotificationEvent, NotificationKind
from review.notifications.queue import deliveries_enqueue
from review.notifications.subscriptions import endpoints_for
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.errors import RatchetError
from runtime.models import Phase, Run, TraceEvent

FAILED_EVENTS = frozenset({"run.failed", "run.policy_violation", "run.budget_exhausted", "review.aborted",
                           "approval.denied"})
CONFLICT_REASONS = frozenset({"receipt_conflict", "untrusted_receipt", "receipt_drift", "receipt_missing"})
WATCHED = frozenset({"approval.requested", "approval.expired", "review.opened", *FAILED_EVENTS})
"""Trace event types that may become a notification; the listener ignores every other type."""


@dataclass(frozen=True)
class Occurrence:
    """What happened, before it is recorded: kind, dedup source, the run and a one-line summary."""

    kind: str
    source: str
    run_id: str
    case_id: str
    summary: str


def kind_of(*, event_type: str, payload: dict[str, Any]) -> str | None:
    """The ``NotificationKind`` value a trace event stands for, or None (see the module docstring)."""
    if event_type == "approval.requested":
        return NotificationKind.APPROVAL_WAITING
    if event_type == "approval.expired":
        return NotificationKind.APPROVAL_EXPIRED
    if event_type == "review.opened":
        conflict = payload.get("reason") in CONFLICT_REASONS
        return NotificationKind.CASE_OPENED if conflict else NotificationKind.RUN_FROZEN
    if event_type in FAILED_EVENTS:
        return NotificationKind.RUN_FAILED
    return None


def _path(kind: str, run_id: str, case_id: str) -> str:
    if kind in (NotificationKind.APPROVAL_WAITING, NotificationKind.APPROVAL_EXPIRING,
                NotificationKind.APPROVAL_EXPIRED):
        return f"/approvals/?run={run_id}"
    if case_id:
        return f"/cases/{case_id}/"
    return f"/runs/{run_id}/"


def _summary(event_type: str, payload: dict[str, Any]) -> str:
    for name in ("problem", "detail", "reason"):
        value = payload.get(name)
        if isinstance(value, str) and value:
            return f"{event_type}: {value}"[:500]
    return event_type


def notification_record(*, occurrence: Occurrence) -> NotificationEvent | None:
    """Record ``occurrence`` once and one pending delivery per endpoint that may hear of it.

    Returns the new event, or None when it was recorded before or its run is gone. The
    endpoints are chosen within each owner's tenant scope (``endpoints_for``). Deliveries are
    handed to Celery once this transaction commits (DESIGN.md section 6.10).
    """
    run = Run.objects.filter(run_id=occurrence.run_id).values("tenant_id", "task_id").first()
    if run is None:
        return None
    try:
        with transaction.atomic():
            event = NotificationEvent.objects.create(
                kind=occurrence.kind, source=occurrence.source[:300], run_id=occurrence.run_id,
                tenant_id=run["tenant_id"], task_id=run["task_id"], case_id=occurrence.case_id,
                summary=occurrence.summary[:500], path=_path(occurrence.kind, occurrence.run_id, occurrence.case_id))
            endpoints = endpoints_for(kind=occurrence.kind, tenant_id=run["tenant_id"])
            deliveries = NotificationDelivery.objects.bulk_create(
                [NotificationDelivery(event=event, endpoint=e, status=DeliveryStatus.PENDING) for e in endpoints])
            ids = [d.pk for d in deliveries if d.pk is not None]
            if len(ids) != len(deliveries):
                ids = list(NotificationDelivery.objects.filter(event=event).values_list("pk", flat=True))
            transaction.on_commit(lambda: deliveries_enqueue(delivery_ids=ids), robust=True)
    except IntegrityError:
        return None  # recorded before (the unique source): each occurrence is told once
    return event


def notification_from_trace(*, run_id: str, seq: int) -> NotificationEvent | None:
    """Record the notification the trace event ``(run_id, seq)`` stands for, if any (idempotent)."""
    row = TraceEvent.objects.filter(run_id=run_id, seq=seq).values("event_type", "payload").first()
    if row is None:
        return None
    payload = row["payload"] or {}
    kind = kind_of(event_type=row["event_type"], payload=payload)
    if kind is None:
        return None
    return notification_record(occurrence=Occurrence(
        kind=kind, source=f"trace:{run_id}:{seq}", run_id=run_id, case_id=str(payload.get("case_id") or ""),
        summary=_summary(row["event_type"], payload)))


def notifications_catch_up(*, since: datetime) -> int:
    """Record every watched trace event since ``since`` that has no notification yet (a listener's
    message lost to a crash or a broker outage); returns how many were recorded."""
    recorded = set(NotificationEvent.objects.filter(created_at__gte=since - timedelta(hours=1),
                                                    source__startswith="trace:").values_list("source", flat=True))
    count = 0
    rows = (TraceEvent.objects.filter(created_at__gte=since, event_type__in=WATCHED)
            .order_by("created_at").values_list("run_id", "seq"))
    for run_id, seq in rows:
        if f"trace:{run_id}:{seq}" not in recorded and notification_from_trace(run_id=run_id, seq=seq) is not None:
            count += 1
    return count


def approvals_expiring_record(*, now: datetime | None = None, limit: int = 200) -> int:
    """Record *approval expiring* for each approval whose signed evidence expires within
    ``RATCHET_NOTIFY_EXPIRY_LEAD_SECONDS`` and has not yet run; returns how many were recorded.

    Reads at most ``limit`` runs waiting on an approval or a pending write, each from its
    verified checkpoint (a checkpoint that fails to verify is skipped: it needs forensics).
    """
    now = now or timezone.now()
    horizon = now + timedelta(seconds=settings.RATCHET_NOTIFY_EXPIRY_LEAD_SECONDS)
    count = 0
    run_ids = Run.objects.filter(phase__in=(Phase.AWAITING_APPROVAL.value, Phase.PENDING.value)).order_by(
        "updated_at").values_list("run_id", flat=True)[:limit]
    for run_id in run_ids:
        try:
            pending = checkpoint_verify(run_id=run_id).state.pending
        except RatchetError:
            continue
        approval = pending.approval if pending is not None else None
        if approval is None or not now < approval.expires_at <= horizon:
            continue
        minutes = max(1, int((approval.expires_at - now).total_seconds() // 60))
        occurrence = Occurrence(
            kind=NotificationKind.APPROVAL_EXPIRING, run_id=run_id, case_id="",
            source=f"expiring:{run_id}:{pending.idempotency_key}:{approval.expires_at.isoformat()}",
            summary=f"approval for {pending.idempotency_key} expires in about {minutes} min")
        if notification_record(occurrence=occurrence) is not None:
            count += 1
    return count
