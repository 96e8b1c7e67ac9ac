"""Story: which run events people hear of, once each. A granted approval that has not run yet
and expires within the lead time is announced as expiring, once however often the sweep looks;
a receipt conflict is a review case, other freezes are "run frozen", the ways a run ends failed
are "run failed", and nothing else is told (DESIGN.md section 6.10)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from review.models import NotificationDelivery, NotificationEvent
from review.notifications.events import approvals_expiring_record, kind_of, notifications_catch_up
from review.notifications.subscriptions import endpoint_create
from runtime.decisions.approvals import approval_grant, approvals_waiting
from tests.review.notifications.conftest import waiting_run


@pytest.mark.django_db(transaction=True)
def test_it_announces_an_approval_about_to_expire_once(tmp_path, ratchet_keys, personas, settings) -> None:  # type: ignore[no-untyped-def]
    settings.RATCHET_NOTIFY_EXPIRY_LEAD_SECONDS = 900
    run_id = waiting_run(tmp_path)
    endpoint = endpoint_create(name="soon", channel="email", target="ann@example.test",
                               kinds=["approval_expiring"], user=personas["operator"])
    assert approvals_expiring_record() == 0, "no approval granted yet: nothing expires"
    [waiting] = approvals_waiting(run_ids=[run_id])
    approval_grant(run_id=run_id, approver="operator", environment_fingerprint=waiting.environment_fingerprint,
                   ttl_seconds=3600)
    assert approvals_expiring_record() == 0, "an hour left: not within fifteen minutes"
    settings.RATCHET_NOTIFY_EXPIRY_LEAD_SECONDS = 3700
    assert approvals_expiring_record() == 1
    assert approvals_expiring_record() == 0, "told once"
    event = NotificationEvent.objects.get(kind="approval_expiring")
    assert event.run_id == run_id and "expires in about" in event.summary
    assert NotificationDelivery.objects.get(event=event).endpoint == endpoint
    assert notifications_catch_up(since=timezone.now()) == 0


def test_it_maps_trace_events_to_what_people_are_told() -> None:
    assert kind_of(event_type="approval.requested", payload={}) == "approval_waiting"
    assert kind_of(event_type="approval.expired", payload={}) == "approval_expired"
    assert kind_of(event_type="review.opened", payload={"reason": "receipt_conflict"}) == "case_opened"
    assert kind_of(event_type="review.opened", payload={"reason": "environment_drift"}) == "run_frozen"
    for failed in ("run.failed", "run.policy_violation", "run.budget_exhausted", "review.aborted", "approval.denied"):
        assert kind_of(event_type=failed, payload={}) == "run_failed"
    for quiet in ("run.completed", "write.executed", "checkpoint.committed", "approval.granted"):
        assert kind_of(event_type=quiet, payload={}) is None
