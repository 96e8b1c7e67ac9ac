"""Whether notifications are getting out: counts for Health and ``/metrics`` (DESIGN.md section 6.10).

An outage of the notification targets must not stay silent (people would think nothing needs
them), so the dashboard's Health page shows the outbox and ``/metrics`` exports it. The
collector is registered with the runtime's exposition (``runtime.observability.collectors``)
because the runtime never imports this app.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from review.models import DeliveryAttempt, DeliveryStatus, NotificationDelivery

RECENT = timedelta(hours=1)
"""How far back Health looks for failed attempts."""


@dataclass(frozen=True)
class OutboxHealth:
    """The notification outbox now: deliveries by status, failed attempts in the last hour, the
    oldest undelivered delivery and the newest error. ``failing`` when any delivery is being
    retried or was given up in the last hour."""

    by_status: dict[str, int]
    failed_attempts_recent: int
    oldest_open: datetime | None
    last_error: str
    gave_up_recent: int

    @property
    def failing(self) -> bool:
        return self.by_status.get(DeliveryStatus.RETRYING, 0) > 0 or self.gave_up_recent > 0


def outbox_health(*, now: datetime | None = None) -> OutboxHealth:
    """Read the outbox (four small queries; DESIGN.md section 6.10)."""
    now = now or timezone.now()
    by_status = {row["status"]: row["n"] for row in
                 NotificationDelivery.objects.values("status").annotate(n=Count("pk")).order_by()}
    open_rows = NotificationDelivery.objects.filter(status__in=(DeliveryStatus.PENDING, DeliveryStatus.RETRYING))
    oldest = open_rows.aggregate(oldest=Min("created_at"))["oldest"]
    recent = DeliveryAttempt.objects.filter(started_at__gte=now - RECENT, ok=False)
    last = recent.order_by("-started_at").values_list("error", flat=True).first() or ""
    gave_up = DeliveryAttempt.objects.filter(
        started_at__gte=now - RECENT, ok=False, delivery__status=DeliveryStatus.GAVE_UP).values(
        "delivery_id").distinct().count()
    return OutboxHealth(by_status=by_status, failed_attempts_recent=recent.count(), oldest_open=oldest,
                        last_error=last, gave_up_recent=gave_up)


class OutboxCollector(Collector):
    """``ratchet_notification_deliveries{status}`` (gauge), ``ratchet_notification_attempts_total{ok}``
    (counter over the kept attempt log) and ``ratchet_notification_oldest_open_seconds``."""

    def collect(self) -> Iterator[Metric]:
        deliveries = GaugeMetricFamily("ratchet_notification_deliveries",
                                       "Notification deliveries by status.", labels=["status"])
        counts = {row["status"]: row["n"] for row in
                  NotificationDelivery.objects.values("status").annotate(n=Count("pk")).order_by()}
        for status in DeliveryStatus.values:
            deliveries.add_metric([status], counts.get(status, 0))
        yield deliveries
        attempts = CounterMetricFamily("ratchet_notification_attempts",
                                       "Notification delivery attempts, by outcome.", labels=["ok"])
        by_ok = {row["ok"]: row["n"] for row in DeliveryAttempt.objects.values("ok").annotate(n=Count("pk")).order_by()}
        attempts.add_metric(["true"], by_ok.get(True, 0))
        attempts.add_metric(["false"], by_ok.get(False, 0))
        yield attempts
        oldest = NotificationDelivery.objects.filter(
            status__in=(DeliveryStatus.PENDING, DeliveryStatus.RETRYING)).aggregate(o=Min("created_at"))["o"]
        age = GaugeMetricFamily("ratchet_notification_oldest_open_seconds",
                                "Age of the oldest undelivered notification (0 when none).")
        age.add_metric([], (timezone.now() - oldest).total_seconds() if oldest else 0.0)
        yield age
