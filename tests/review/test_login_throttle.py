"""Failed sign-ins are throttled per username and per client address, so
passwords cannot be guessed at speed (``review.throttle``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from review.models import LoginThrottle
from tests.review.conftest import PASSWORD

pytestmark = pytest.mark.usefixtures("login_limits")


def _sign_in(client: Client, username: str, password: str, ip: str = "10.0.0.1"):  # type: ignore[no-untyped-def]
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=ip
    )


def _signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_it_signs_in_with_the_right_password(personas) -> None:
    client = Client()
    response = _sign_in(client, "operator", PASSWORD)
    assert response.status_code == 302 and response["Location"] == reverse("review:runs")
    assert _signed_in(client)


def test_it_locks_a_username_after_repeated_failures_even_for_the_right_password(personas) -> None:
    client = Client()
    for _ in range(2):
        assert _sign_in(client, "operator", "wrong").status_code == 200
    locked = _sign_in(client, "operator", "wrong")
    assert locked.status_code == 429
    assert int(locked["Retry-After"]) == 300
    assert b"Too many failed sign-in attempts" in locked.content

    response = _sign_in(client, "Operator", PASSWORD)  # case does not dodge the lock
    assert response.status_code == 429
    assert not _signed_in(client)
    assert _sign_in(Client(), "operator", PASSWORD, ip="10.9.9.9").status_code == 429, (
        "from any address"
    )


def test_it_lifts_the_lock_after_the_lockout(personas) -> None:
    client = Client()
    for _ in range(3):
        _sign_in(client, "operator", "wrong")
    with time_machine.travel(timezone.now() + timedelta(seconds=301), tick=False):
        response = _sign_in(client, "operator", PASSWORD)
    assert response.status_code == 302
    assert _signed_in(client)


def test_it_forgets_old_failures_outside_the_window(personas) -> None:
    client = Client()
    for _ in range(2):
        _sign_in(client, "operator", "wrong")
    with time_machine.travel(timezone.now() + timedelta(seconds=601), tick=False):
        assert _sign_in(client, "operator", "wrong").status_code == 200, (
            "window restarted: one failure"
        )
        assert _sign_in(client, "operator", PASSWORD).status_code == 302


def test_a_success_clears_the_username_counter(personas) -> None:
    client = Client()
    for _ in range(2):
        _sign_in(client, "operator", "wrong")
    assert _sign_in(client, "operator", PASSWORD).status_code == 302
    for _ in range(2):
        assert _sign_in(Client(), "operator", "wrong").status_code == 200, "counting starts again"


def test_it_locks_an_address_guessing_many_usernames(personas) -> None:
    for i in range(10):
        _sign_in(Client(), f"nobody-{i}", "wrong", ip="10.6.6.6")
    assert _sign_in(Client(), "reviewer", PASSWORD, ip="10.6.6.6").status_code == 429
    assert _sign_in(Client(), "reviewer", PASSWORD, ip="10.7.7.7").status_code == 302


def test_it_never_stores_what_was_typed_as_a_username(personas) -> None:
    _sign_in(Client(), "hunter2-typed-into-the-wrong-box", "wrong")
    keys = list(LoginThrottle.objects.values_list("key", flat=True))
    assert keys and all("hunter2" not in key and len(key) == 64 for key in keys)


def test_the_admin_signs_in_through_the_throttled_form(personas) -> None:
    response = Client().get("/admin/login/?next=/admin/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/admin/")


def test_it_ignores_a_next_url_on_another_site(personas) -> None:
    client = Client()
    response = client.post(
        reverse("login") + "?next=https://evil.example/",
        {"username": "operator", "password": PASSWORD},
    )
    assert response.status_code == 302 and response["Location"] == reverse("review:runs")


def test_a_signed_in_user_who_may_not_open_the_admin_is_not_sent_round_in_circles(
    client_for,
) -> None:
    client = client_for("operator")  # not staff
    response = client.get("/admin/", follow=True)
    assert response.status_code == 200
    assert response.redirect_chain[-1][0].startswith("/accounts/login/?next=/admin/")
    assert b"Sign in with another account" in response.content
