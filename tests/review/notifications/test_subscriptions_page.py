"""Story: an operator opens Notifications, adds a webhook for failed runs, sees its signing
secret, re-chooses its events and switches it off through htmx, and deletes it. A target that is
no URL comes back with the error and the input kept. Another user cannot change it, and sees
only their own endpoints and their groups'."""

from __future__ import annotations

import pytest
from django.urls import reverse

from review.models import NotificationEndpoint
from review.notifications.subscriptions import endpoint_create

pytestmark = pytest.mark.django_db

PAGE = "/notifications/"


def test_it_lets_a_user_add_change_and_delete_their_own_endpoint(client_for, personas) -> None:  # type: ignore[no-untyped-def]
    operator = client_for("operator")
    assert "No endpoint yet" in operator.get(PAGE).content.decode()
    response = operator.post(reverse("review:notification-add"), {
        "name": "pager", "channel": "webhook", "target": "https://hooks.example.test/ratchet",
        "kinds": ["run_failed", "approval_waiting"]})
    assert response.status_code == 303 and response["Location"] == PAGE
    endpoint = NotificationEndpoint.objects.get(user=personas["operator"])
    assert sorted(endpoint.kinds) == ["approval_waiting", "run_failed"] and endpoint.enabled
    page = operator.get(PAGE).content.decode()
    assert endpoint.secret in page and "hooks.example.test" in page

    htmx = {"HX-Request": "true", "HX-Target": "endpoints"}
    change = reverse("review:notification-change")
    fragment = operator.post(change, {"endpoint_id": endpoint.pk, "change": "kinds", "kinds": ["case_opened"]},
                             headers=htmx)
    assert fragment.status_code == 200 and b'id="endpoints"' in fragment.content
    assert b"<html" not in fragment.content, "only the list is swapped"
    operator.post(change, {"endpoint_id": endpoint.pk, "change": "toggle"}, headers=htmx)
    endpoint.refresh_from_db()
    assert (endpoint.kinds, endpoint.enabled) == (["case_opened"], False)

    reviewer = client_for("reviewer")
    reviewer.post(change, {"endpoint_id": endpoint.pk, "change": "delete"})
    assert NotificationEndpoint.objects.filter(pk=endpoint.pk).exists(), "not the reviewer's to delete"
    assert endpoint.secret not in reviewer.get(PAGE).content.decode()

    operator.post(change, {"endpoint_id": endpoint.pk, "change": "delete"})
    assert not NotificationEndpoint.objects.filter(pk=endpoint.pk).exists()


def test_it_keeps_the_input_of_a_refused_endpoint(client_for, personas) -> None:  # type: ignore[no-untyped-def]
    response = client_for("reviewer").post(reverse("review:notification-add"), {
        "name": "mine", "channel": "webhook", "target": "not a url", "kinds": ["case_opened"]})
    assert response.status_code == 400
    page = response.content.decode()
    assert "a webhook needs an http(s) URL" in page and 'value="not a url"' in page
    assert not NotificationEndpoint.objects.exists()


def test_it_shows_the_endpoints_of_the_users_groups(client_for, personas) -> None:  # type: ignore[no-untyped-def]
    group = personas["operator"].groups.get()
    endpoint_create(name="team channel", channel="apprise", target="json://127.0.0.1:9/", kinds=["approval_waiting"],
                    group=group)
    assert "team channel" in client_for("operator").get(PAGE).content.decode()
    assert "team channel" not in client_for("reviewer").get(PAGE).content.decode()
