"""One delivery attempt, recorded, and when to try again (DESIGN.md section 6.10).

An attempt is claimed by compare-and-set on the delivery's attempt count (STYLE.md rule 1), so a
retry message and the sweep that finds the same due delivery never send it twice at once. The
send itself runs with no transaction open (STYLE.md rule 2), then the attempt is recorded.
Failures are retried after ``RATCHET_NOTIFY_BACKOFF_SECONDS * 2**(n-1)`` seconds (capped at
``RATCHET_NOTIFY_BACKOFF_MAX_SECONDS``) until ``RATCHET_NOTIFY_MAX_ATTEMPTS``, then the delivery
is given up; every attempt stays in ``DeliveryAttempt`` for the admins. Before each attempt the
endpoint must still be on and its owner still allowed to see the event's tenant, or the
delivery is cancelled (DESIGN.md section 6.10).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta

import apprise
import httpx
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from review.models import ChannelKind, DeliveryAttempt, DeliveryStatus, NotificationDelivery
from review.notifications.messages import Message, message_render
from review.notifications.signing import webhook_headers
from review.notifications.subscriptions import endpoint_may_hear

OPEN = (DeliveryStatus.PENDING, DeliveryStatus.RETRYING)


@dataclass(frozen=True)
class AttemptResult:
    """What one attempt did: ``status`` of the delivery afterwards, and seconds until the next
    attempt (None: no further attempt)."""

    status: str
    retry_in: float | None


def backoff_seconds(*, attempts: int) -> float:
    """Seconds to wait after the ``attempts``-th failed attempt (1, 2, ...): exponential, capped."""
    delay = settings.RATCHET_NOTIFY_BACKOFF_SECONDS * (2 ** max(0, attempts - 1))
    return float(min(delay, settings.RATCHET_NOTIFY_BACKOFF_MAX_SECONDS))


class SendFailed(Exception):
    """One attempt failed; ``status_code`` when the receiver answered."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


def _send(channel: str, target: str, secret: str, message: Message, message_id: str) -> int | None:
    timeout = settings.RATCHET_NOTIFY_TIMEOUT_SECONDS
    if channel == ChannelKind.WEBHOOK:
        headers = {"content-type": "application/json", "user-agent": "ratchet-notifications",
                   **webhook_headers(secret=secret, message_id=message_id, sent_at=timezone.now(), body=message.body)}
        try:
            response = httpx.post(target, content=message.body.encode(), headers=headers, timeout=timeout,
                                  follow_redirects=False)
        except httpx.HTTPError as exc:
            raise SendFailed(f"{type(exc).__name__}: {exc}") from None
        if not 200 <= response.status_code < 300:
            raise SendFailed(f"receiver answered HTTP {response.status_code}", response.status_code)
        return response.status_code
    if channel == ChannelKind.EMAIL:
        try:
            send_mail(message.title, message.text, None, [target], fail_silently=False)
        except OSError as exc:  # smtplib's errors are OSErrors too
            raise SendFailed(f"{type(exc).__name__}: {exc}") from None
        return None
    notifier = apprise.Apprise()
    if not notifier.add(target):
        raise SendFailed("apprise does not understand this URL")
    if not notifier.notify(title=message.title, body=message.text):
        raise SendFailed("apprise reported that the service refused or could not be reached")
    return None


def delivery_attempt(*, delivery_id: int) -> AttemptResult | None:
    """Make the next attempt of delivery ``delivery_id`` if it is due, and record it.

    Returns None when there was nothing to do (delivered, given up, not yet due, or claimed by
    another worker); otherwise the delivery's status afterwards and when to try again. Never
    raises for a failing receiver: that is a recorded, retried attempt.
    """
    now = timezone.now()
    row = (NotificationDelivery.objects.filter(pk=delivery_id, status__in=OPEN)
           .select_related("event", "endpoint").first())
    if row is None or (row.next_attempt_at is not None and row.next_attempt_at > now):
        return None
    endpoint = row.endpoint
    if not endpoint_may_hear(endpoint=endpoint, tenant_id=row.event.tenant_id):
        # Fail closed: an endpoint switched off, or an owner whose scope no longer holds the
        # tenant, gets nothing more, even for an event recorded while it still did.
        cancelled = NotificationDelivery.objects.filter(pk=delivery_id, attempts=row.attempts, status__in=OPEN).update(
            status=DeliveryStatus.CANCELLED, next_attempt_at=None,
            last_error="endpoint switched off, or its owner may no longer see this tenant")
        return AttemptResult(status=DeliveryStatus.CANCELLED, retry_in=None) if cancelled else None
    number = row.attempts + 1
    # The claim pushes next_attempt_at past this attempt's timeout, so a worker that dies while
    # sending leaves a delivery the sweep finds again later.
    hold = now + timedelta(seconds=settings.RATCHET_NOTIFY_TIMEOUT_SECONDS * 3)
    claimed = NotificationDelivery.objects.filter(pk=delivery_id, attempts=row.attempts, status__in=OPEN).filter(
        Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now)).update(attempts=F("attempts") + 1,
                                                                                next_attempt_at=hold)
    if claimed != 1:
        return None
    message = message_render(event=row.event)
    started = time.monotonic()
    status_code, error = None, ""
    try:
        status_code = _send(endpoint.channel, endpoint.target, endpoint.secret, message, f"ratchet-{row.pk}")
    except SendFailed as exc:
        status_code, error = exc.status_code, str(exc)[:500]
    duration_ms = int((time.monotonic() - started) * 1000)
    finished = timezone.now()
    if not error:
        status, retry_in = DeliveryStatus.DELIVERED, None
    elif number >= settings.RATCHET_NOTIFY_MAX_ATTEMPTS:
        status, retry_in = DeliveryStatus.GAVE_UP, None
    else:
        status, retry_in = DeliveryStatus.RETRYING, backoff_seconds(attempts=number)
    with transaction.atomic():
        DeliveryAttempt.objects.create(delivery_id=row.pk, number=number, started_at=now, duration_ms=duration_ms,
                                       ok=not error, status_code=status_code, error=error)
        NotificationDelivery.objects.filter(pk=row.pk, attempts=number).update(
            status=status, last_error=error,
            delivered_at=finished if not error else None,
            next_attempt_at=finished + timedelta(seconds=retry_in) if retry_in is not None else None)
    return AttemptResult(status=status, retry_in=retry_in)


def deliveries_due(*, limit: int = 500) -> list[int]:
    """Ids of open deliveries whose next attempt is due (or never scheduled), oldest first."""
    now = timezone.now()
    return list(NotificationDelivery.objects.filter(status__in=OPEN)
                .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
                .order_by("created_at").values_list("pk", flat=True)[:limit])
