"""Story: N14, a known username cannot be used to lock its owner out (``review.throttle``,
DESIGN.md section 2.5).

Anyone may guess at a known admin's username until unknown clients are locked out; the admin's
own browser, which signed in before and holds the signed device cookie, still signs in. A cookie
that is forged, expired or names another username is an unknown client, and guessing from a
known device is throttled on that device's own counter.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.core import signing
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from review.models import LoginThrottle, ThrottleKind
from review.throttle import DEVICE_COOKIE
from tests.review.conftest import PASSWORD

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("login_limits")]


def _sign_in(client: Client, username: str, password: str, ip: str = "10.0.0.1"):  # type: ignore[no-untyped-def]
    return client.post(reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=ip)


def _known_device(username: str) -> Client:
    """A browser that signed in as ``username`` once and signed out again (keeps its cookies)."""
    browser = Client()
    response = _sign_in(browser, username, PASSWORD, ip="192.0.2.10")
    assert response.status_code == 302 and DEVICE_COOKIE in response.cookies
    cookie = response.cookies[DEVICE_COOKIE]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    browser.post(reverse("logout"))
    return browser


def _lock_out(username: str, ip: str = "203.0.113.9") -> None:
    attacker = Client()
    for _ in range(3):
        _sign_in(attacker, username, "wrong", ip=ip)
    assert _sign_in(Client(), username, PASSWORD, ip="198.51.100.1").status_code == 429, (
        "unknown clients are locked out")


def test_n14_a_known_device_signs_in_while_its_username_is_locked_for_everyone_else(personas) -> None:
    browser = _known_device("admin")
    _lock_out("admin")
    response = _sign_in(browser, "admin", PASSWORD, ip="192.0.2.10")
    assert response.status_code == 302, "the admin's own browser is not locked out"
    assert "_auth_user_id" in browser.session
    assert _sign_in(Client(), "admin", PASSWORD, ip="192.0.2.10").status_code == 429, (
        "a browser without the cookie, even from the admin's address, still is")


def test_n14_a_known_device_is_not_locked_by_its_address_either(personas) -> None:
    browser = _known_device("admin")
    for i in range(10):  # someone behind the same address guesses many usernames
        _sign_in(Client(), f"nobody-{i}", "wrong", ip="192.0.2.10")
    assert _sign_in(Client(), "reviewer", PASSWORD, ip="192.0.2.10").status_code == 429
    assert _sign_in(browser, "admin", PASSWORD, ip="192.0.2.10").status_code == 302


def test_n14_guessing_from_a_known_device_locks_that_device_only(personas) -> None:
    browser = _known_device("admin")
    for _ in range(2):
        assert _sign_in(browser, "admin", "wrong").status_code == 200
    assert _sign_in(browser, "admin", "wrong").status_code == 429
    assert _sign_in(browser, "admin", PASSWORD).status_code == 429, "the device's own counter locks it"
    assert LoginThrottle.objects.filter(kind=ThrottleKind.DEVICE).count() == 1
    assert not LoginThrottle.objects.filter(kind=ThrottleKind.USER).exists(), (
        "a known device's failures are not charged to the username")
    assert _sign_in(Client(), "admin", PASSWORD).status_code == 302, "other clients are unaffected"


def test_n14_a_cookie_for_another_username_does_not_dodge_the_lock(personas) -> None:
    browser = _known_device("operator")
    _lock_out("admin")
    assert _sign_in(browser, "admin", PASSWORD).status_code == 429


def test_n14_a_forged_or_expired_device_cookie_is_an_unknown_client(personas, settings) -> None:
    browser = _known_device("admin")
    _lock_out("admin")
    forged = Client()
    forged.cookies[DEVICE_COOKIE] = signing.dumps({"u": "admin", "d": "x" * 32}, salt="not-the-device-salt")
    assert _sign_in(forged, "admin", PASSWORD).status_code == 429
    with time_machine.travel(timezone.now() + timedelta(seconds=3601), tick=False):
        # The cookie has expired; the lock (300 s) has too, so lock again at that moment.
        _lock_out("admin", ip="203.0.113.77")
        assert _sign_in(browser, "admin", PASSWORD).status_code == 429


def test_n14_the_owner_signing_in_gives_a_guesser_no_new_tries(personas) -> None:
    browser = _known_device("admin")
    _lock_out("admin")
    assert _sign_in(browser, "admin", PASSWORD).status_code == 302
    assert _sign_in(Client(), "admin", PASSWORD, ip="203.0.113.9").status_code == 429, (
        "the username stays locked for unknown clients")
