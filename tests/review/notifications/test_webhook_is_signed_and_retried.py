"""Story: an operator subscribes a webhook to "approval waiting"; a run starts waiting while the
receiver is down. The attempt fails and is recorded, the delivery waits its backoff; once the
receiver is back the next attempt arrives, its signature verifies at the receiver, and the link
in it is absolute. A receiver that checks with the wrong secret refuses the same request."""

from __future__ import annotations

import pytest
from django.utils import timezone

from review.models import DeliveryAttempt, DeliveryStatus, NotificationDelivery, NotificationEvent
from review.notifications.delivery import backoff_seconds, delivery_attempt
from review.notifications.events import notifications_catch_up
from review.notifications.subscriptions import endpoint_create
from tests.helpers.notify_receivers import wait_until, webhook_data
from tests.review.notifications.conftest import PUBLIC, waiting_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_retries_after_the_receiver_was_down_and_the_receiver_verifies_the_signature(
        tmp_path, ratchet_keys, personas, receiver) -> None:  # type: ignore[no-untyped-def]
    started = timezone.now()
    run_id = waiting_run(tmp_path)
    endpoint = endpoint_create(name="pager", channel="webhook", target=receiver.url, kinds=["approval_waiting"],
                               user=personas["operator"])
    receiver.secret = endpoint.secret
    assert endpoint.secret.startswith("whsec_")

    assert notifications_catch_up(since=started) == 1
    event = NotificationEvent.objects.get(run_id=run_id)
    assert (event.kind, event.path) == ("approval_waiting", f"/approvals/?run={run_id}")
    delivery = NotificationDelivery.objects.get(event=event, endpoint=endpoint)

    first = delivery_attempt(delivery_id=delivery.pk)  # the receiver is down
    assert first is not None and first.status == DeliveryStatus.RETRYING
    assert first.retry_in == backoff_seconds(attempts=1) == 0.2
    assert delivery_attempt(delivery_id=delivery.pk) is None, "not due before its backoff"
    failed = DeliveryAttempt.objects.get(delivery=delivery, number=1)
    assert not failed.ok and "ConnectError" in failed.error

    receiver.start()
    second = wait_until(lambda: delivery_attempt(delivery_id=delivery.pk), what="the retry to be due")
    assert second.status == DeliveryStatus.DELIVERED and second.retry_in is None
    assert [a.ok for a in DeliveryAttempt.objects.filter(delivery=delivery).order_by("number")] == [False, True]
    [got] = receiver.accepted
    assert receiver.rejected == []
    data = webhook_data(got)
    assert data["url"] == f"{PUBLIC}/approvals/?run={run_id}"
    assert got["payload"]["type"] == "ratchet.approval_waiting"
    assert got["headers"]["webhook-id"] == f"ratchet-{delivery.pk}"
    assert abs(int(got["headers"]["webhook-timestamp"]) - timezone.now().timestamp()) < 60

    # The same signed request, checked with another endpoint's secret, is refused.
    receiver.secret = "whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="
    NotificationDelivery.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.PENDING, next_attempt_at=None)
    assert delivery_attempt(delivery_id=delivery.pk).status == DeliveryStatus.RETRYING
    assert len(receiver.rejected) == 1 and len(receiver.accepted) == 1


def test_it_gives_up_after_the_last_attempt_and_records_each(
        tmp_path, ratchet_keys, personas, receiver, settings) -> None:  # type: ignore[no-untyped-def]
    settings.RATCHET_NOTIFY_MAX_ATTEMPTS = 2
    settings.RATCHET_NOTIFY_BACKOFF_SECONDS = 0.05
    started = timezone.now()
    waiting_run(tmp_path)
    endpoint_create(name="down", channel="webhook", target=receiver.url, kinds=["approval_waiting"],
                    user=personas["operator"])
    notifications_catch_up(since=started)
    delivery = NotificationDelivery.objects.get()
    assert delivery_attempt(delivery_id=delivery.pk).status == DeliveryStatus.RETRYING
    last = wait_until(lambda: delivery_attempt(delivery_id=delivery.pk), what="the second attempt")
    assert (last.status, last.retry_in) == (DeliveryStatus.GAVE_UP, None)
    assert DeliveryAttempt.objects.filter(delivery=delivery, ok=False).count() == 2
    assert delivery_attempt(delivery_id=delivery.pk) is None


def test_its_backoff_doubles_and_is_capped(settings) -> None:  # type: ignore[no-untyped-def]
    settings.RATCHET_NOTIFY_BACKOFF_SECONDS = 10.0
    settings.RATCHET_NOTIFY_BACKOFF_MAX_SECONDS = 60.0
    assert [backoff_seconds(attempts=n) for n in (1, 2, 3, 4, 5)] == [10.0, 20.0, 40.0, 60.0, 60.0]
