"""Story: an approval waits while the team's webhook receiver is down. A real Celery worker
attempts the delivery, records the failure and publishes the retry with its backoff as countdown;
the receiver comes back, a later attempt from the worker arrives, and the receiver verifies its
signature (DESIGN.md section 6.10). No attempt is lost from the log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from django.utils import timezone

from review.models import DeliveryAttempt, DeliveryStatus, NotificationDelivery
from review.notifications.events import notifications_catch_up
from review.notifications.queue import DELIVER_TASK
from review.notifications.subscriptions import endpoint_create
from review.roles import roles_sync
from tests.celery.support import Worker
from tests.helpers.notify_receivers import WebhookReceiver, free_port, wait_until, webhook_data
from tests.review.notifications.conftest import waiting_run

pytestmark = pytest.mark.django_db(transaction=True)

PUBLIC = "https://ratchet.example.test"


def test_it_retries_from_the_worker_until_the_receiver_is_back(
        tmp_path: Path, workers: Callable[..., Worker], send: Callable[..., None],
        django_user_model) -> None:  # type: ignore[no-untyped-def]
    from django.contrib.auth.models import Group

    roles_sync()
    operator = django_user_model.objects.create_user(username="operator-ann")
    operator.groups.add(Group.objects.get(name="operator"))
    receiver = WebhookReceiver(port=free_port())
    endpoint = endpoint_create(name="pager", channel="webhook", target=receiver.url, kinds=["approval_waiting"],
                               user=operator)
    receiver.secret = endpoint.secret
    started = timezone.now()
    run_id = waiting_run(tmp_path)
    assert notifications_catch_up(since=started) == 1
    delivery = NotificationDelivery.objects.get()

    worker = workers(name="notify", pool="solo", concurrency=1, env={
        "RATCHET_NOTIFY_BACKOFF_SECONDS": "0.3", "RATCHET_NOTIFY_MAX_ATTEMPTS": "12",
        "RATCHET_PUBLIC_BASE_URL": PUBLIC})
    try:
        send(DELIVER_TASK, delivery.pk)
        wait_until(lambda: DeliveryAttempt.objects.filter(delivery=delivery, ok=False).exists(), timeout=60,
                   what=f"the worker's first attempt:\n{worker.output()[-2000:]}")
        receiver.start()
        wait_until(lambda: NotificationDelivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.DELIVERED)
                   .exists(), timeout=90, what=f"the retried delivery:\n{worker.output()[-3000:]}")
    finally:
        receiver.stop()
    attempts = list(DeliveryAttempt.objects.filter(delivery=delivery).order_by("number").values_list("number", "ok"))
    assert attempts[0] == (1, False) and attempts[-1][1] is True
    assert [n for n, _ in attempts] == list(range(1, len(attempts) + 1)), "every attempt is in the log"
    assert [ok for _, ok in attempts].count(True) == 1
    [got] = receiver.accepted
    assert receiver.rejected == []
    assert webhook_data(got)["url"] == f"{PUBLIC}/approvals/?run={run_id}"
