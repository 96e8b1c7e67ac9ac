"""Story: two tenants, acme and globex. An operator scoped to acme, a group scoped to acme, a
group with no scope row and an all-tenants operator all subscribe to "approval waiting". When a
globex run waits, only the all-tenants operator is told; when an acme run waits, everyone scoped
to acme is told too. A signed-in stranger with no role (no right to read runs) hears nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from review.models import NotificationDelivery, NotificationEvent
from review.notifications.events import notifications_catch_up
from review.notifications.subscriptions import endpoint_create
from review.scope import scope_set
from tests.review.notifications.conftest import waiting_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_sends_nothing_outside_each_subscribers_tenant_scope(
        tmp_path, ratchet_keys, personas, django_user_model) -> None:  # type: ignore[no-untyped-def]
    operators = Group.objects.get(name="operator")
    acme_ann = django_user_model.objects.create_user(username="acme-ann")
    acme_ann.groups.add(operators)
    scope_set(user=acme_ann, tenant_ids=["acme"])
    acme_team = Group.objects.create(name="acme-team")
    acme_team.permissions.set(operators.permissions.all())
    scope_set(group=acme_team, tenant_ids=["acme"])
    unscoped_team = Group.objects.create(name="unscoped-team")
    unscoped_team.permissions.set(operators.permissions.all())
    kinds = ["approval_waiting"]
    url = "http://127.0.0.1:9/never"
    mine = {
        "acme-ann": endpoint_create(name="a", channel="webhook", target=url, kinds=kinds, user=acme_ann),
        "acme-team": endpoint_create(name="t", channel="webhook", target=url, kinds=kinds, group=acme_team),
        "unscoped": endpoint_create(name="u", channel="webhook", target=url, kinds=kinds, group=unscoped_team),
        "all": endpoint_create(name="o", channel="webhook", target=url, kinds=kinds, user=personas["operator"]),
        "stranger": endpoint_create(name="s", channel="webhook", target=url, kinds=kinds, user=personas["stranger"]),
    }
    names = {endpoint.pk: name for name, endpoint in mine.items()}

    started = timezone.now()
    globex = waiting_run(tmp_path / "globex", tenant="globex")
    acme = waiting_run(tmp_path / "acme", tenant="acme")
    assert notifications_catch_up(since=started) == 2

    def told(run_id: str) -> set[str]:
        event = NotificationEvent.objects.get(run_id=run_id)
        return {names[pk] for pk in NotificationDelivery.objects.filter(event=event).values_list("endpoint", flat=True)}

    assert told(globex) == {"all"}
    assert told(acme) == {"all", "acme-ann", "acme-team"}


def test_it_cancels_a_delivery_whose_owner_lost_the_tenant_before_it_was_sent(
        tmp_path, ratchet_keys, personas, django_user_model) -> None:  # type: ignore[no-untyped-def]
    from review.models import DeliveryAttempt
    from review.notifications.delivery import delivery_attempt

    ann = django_user_model.objects.create_user(username="ann")
    ann.groups.add(Group.objects.get(name="operator"))
    scope_set(user=ann, tenant_ids=["acme"])
    endpoint_create(name="a", channel="webhook", target="http://127.0.0.1:9/never", kinds=["approval_waiting"],
                    user=ann)
    started = timezone.now()
    waiting_run(tmp_path, tenant="acme")
    notifications_catch_up(since=started)
    delivery = NotificationDelivery.objects.get()
    scope_set(user=ann, tenant_ids=["globex"])
    result = delivery_attempt(delivery_id=delivery.pk)
    assert result is not None and result.status == "cancelled"
    assert not DeliveryAttempt.objects.exists(), "nothing was sent"
