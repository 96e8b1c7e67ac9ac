"""Story: the team's webhook receiver is down. The run it should hear about goes on regardless
(the run's commit never waits for a delivery); the failed attempts show on Health as
"notifications failing" and in /metrics as a retrying delivery and failed attempts."""

from __future__ import annotations

import pytest
from django.utils import timezone

from review.models import NotificationDelivery
from review.notifications.delivery import delivery_attempt
from review.notifications.events import notifications_catch_up
from review.notifications.subscriptions import endpoint_create
from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.engine import run_advance
from tests.review.notifications.conftest import waiting_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_shows_a_notification_outage_on_health_and_in_metrics(
        tmp_path, ratchet_keys, personas, receiver, client_for) -> None:  # type: ignore[no-untyped-def]
    endpoint_create(name="down", channel="webhook", target=receiver.url, kinds=["approval_waiting"],
                    user=personas["operator"])
    started = timezone.now()
    run_id = waiting_run(tmp_path)  # subscribed before the run waits: the listener fires too
    notifications_catch_up(since=started)
    delivery = NotificationDelivery.objects.get()
    assert delivery_attempt(delivery_id=delivery.pk).status == "retrying"

    [waiting] = approvals_waiting(run_ids=[run_id])
    approval_grant(run_id=run_id, approver="operator", environment_fingerprint=waiting.environment_fingerprint)
    assert run_advance(run_id=run_id, worker="story-worker").phase == "completed", "the outage never stops a run"

    health = client_for("admin").get("/health/").content.decode()
    assert "notifications failing" in health and "Last error: ConnectError" in health
    scoped = client_for("operator").get("/health/").content.decode()
    assert "notifications failing" in scoped

    metrics = client_for("anonymous").get("/metrics").content.decode()
    assert 'ratchet_notification_deliveries{status="retrying"} 1.0' in metrics
    assert 'ratchet_notification_attempts_total{ok="false"} 1.0' in metrics
    assert "ratchet_notification_oldest_open_seconds" in metrics
