"""Failed sign-in throttling: password guessing is slowed per username and per client address,
and a person's own browser is never locked out by someone else's guessing (DESIGN.md section 2.5).

An attempt from an *unknown client* counts against two counters: one for the username, one for
the client address (``REMOTE_ADDR``). ``RATCHET_LOGIN_MAX_FAILURES`` failures for a username (or
``RATCHET_LOGIN_MAX_FAILURES_PER_IP`` for an address) within ``RATCHET_LOGIN_WINDOW_SECONDS`` lock
that username (address) for unknown clients for ``RATCHET_LOGIN_LOCKOUT_SECONDS``. While locked,
credentials are not even checked, so guessing stops paying; a success clears the username
counter but not the address counter, so one valid account cannot be used to reset an address
that is guessing others.

A *known device* is a browser that signed in as that username before: a successful sign-in sets
a signed device cookie (:data:`DEVICE_COOKIE`) naming the username and a random device id. An
attempt that presents a valid device cookie for the username it types counts only against that
device's own counter (the same limit) and ignores the username and address locks, so anyone who
knows an admin's username can lock out every unknown client but not the admin's own browser
(the device-cookie scheme of OWASP's "Slow Down Online Guessing Attacks with Device Cookies").
A forged, expired or other-username cookie is an unknown client.

Why the database and not the cache: Django's default cache is per process, so with several web
workers an attacker would get the limit once per worker; the database is shared by every worker
on every machine, needs no extra service and behaves the same on SQLite and PostgreSQL. Only the
dashboard's own ``LoginThrottle`` table is written, never a runtime table.

Behind a reverse proxy every request has the proxy's address unless the proxy's
``X-Forwarded-For`` is trusted (the deploy guide's uvicorn ``--proxy-headers``); otherwise raise
the per-address limit (or set it very high) and rely on the per-username limit.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core import signing
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from review.models import LoginThrottle, ThrottleKind


@dataclass(frozen=True)
class Lockout:
    """Sign-in is refused; ``retry_after_seconds`` (>= 1) until the lock lifts."""

    retry_after_seconds: int


def _key(kind: ThrottleKind, value: str) -> str:
    return hashlib.sha256(f"{kind.value}:{value}".encode()).hexdigest()


DEVICE_COOKIE = "ratchet_device"
"""The signed cookie a browser gets when it signs in: ``{"u": username, "d": device id}``."""
_DEVICE_SALT = "review.throttle.device"


def _normal(username: str) -> str:
    return username.strip().lower()


def device_id(*, request: HttpRequest, username: str) -> str | None:
    """The id of the known device this request comes from for ``username``, or None.

    Args:
        request: the sign-in request; its :data:`DEVICE_COOKIE` is read.
        username: as typed (compared case-insensitively, stripped).

    Returns:
        The random device id the cookie names if its signature verifies, it has not expired
        (``RATCHET_LOGIN_DEVICE_SECONDS``) and it names this username; None otherwise (an unknown
        client, whatever the cookie holds).
    """
    raw = request.COOKIES.get(DEVICE_COOKIE)
    if not raw:
        return None
    try:
        value = signing.loads(raw, salt=_DEVICE_SALT, max_age=settings.RATCHET_LOGIN_DEVICE_SECONDS)
    except signing.BadSignature:  # also SignatureExpired
        return None
    if not isinstance(value, dict) or value.get("u") != _normal(username):
        return None
    device = value.get("d")
    return device if isinstance(device, str) and device else None


def device_cookie_set(*, response: HttpResponse, username: str) -> None:
    """Make the browser a known device for ``username`` (after a successful sign-in).

    A new device id each time, so a cookie copied from an old sign-in counts separately. The
    cookie is HttpOnly, SameSite=Lax and Secure wherever the session cookie is.
    """
    value = signing.dumps({"u": _normal(username), "d": secrets.token_hex(16)}, salt=_DEVICE_SALT)
    response.set_cookie(DEVICE_COOKIE, value, max_age=settings.RATCHET_LOGIN_DEVICE_SECONDS, httponly=True,
                        samesite="Lax", secure=settings.SESSION_COOKIE_SECURE)


def _keys(*, username: str, ip: str, device: str | None) -> dict[str, tuple[ThrottleKind, int]]:
    if device is not None:
        return {_key(ThrottleKind.DEVICE, f"{_normal(username)}:{device}"): (
            ThrottleKind.DEVICE, settings.RATCHET_LOGIN_MAX_FAILURES)}
    return {
        _key(ThrottleKind.USER, _normal(username)): (
            ThrottleKind.USER,
            settings.RATCHET_LOGIN_MAX_FAILURES,
        ),
        _key(ThrottleKind.IP, ip): (ThrottleKind.IP, settings.RATCHET_LOGIN_MAX_FAILURES_PER_IP),
    }


def login_throttle_check(*, username: str, ip: str, device: str | None = None) -> Lockout | None:
    """Return a :class:`Lockout` if this attempt is locked now, else ``None``.

    Args:
        username: as typed (compared case-insensitively, stripped).
        ip: the client address (``REMOTE_ADDR``).
        device: the known device's id (:func:`device_id`), or None for an unknown client: a
            known device is judged by its own counter only, an unknown client by the
            username's and the address's.
    """
    now = timezone.now()
    until = (
        LoginThrottle.objects.filter(
            key__in=list(_keys(username=username, ip=ip, device=device)), locked_until__gt=now
        )
        .order_by("-locked_until")
        .values_list("locked_until", flat=True)
        .first()
    )
    if until is None:
        return None
    return Lockout(max(1, math.ceil((until - now).total_seconds())))


def login_failure_record(*, username: str, ip: str, device: str | None = None) -> Lockout | None:
    """Count one failed sign-in; return the lockout it triggers, if any.

    A known device's failure counts against that device only; an unknown client's against the
    username and the address (see :func:`login_throttle_check` for the arguments).

    A counter whose window (``RATCHET_LOGIN_WINDOW_SECONDS``) or lock has run out starts again
    from zero.
    """
    now = timezone.now()
    window = timedelta(seconds=settings.RATCHET_LOGIN_WINDOW_SECONDS)
    lockout = timedelta(seconds=settings.RATCHET_LOGIN_LOCKOUT_SECONDS)
    locked = False
    with transaction.atomic():
        for key, (kind, limit) in _keys(username=username, ip=ip, device=device).items():
            row, _ = LoginThrottle.objects.select_for_update().get_or_create(
                key=key, defaults={"kind": kind, "failures": 0, "window_started_at": now}
            )
            expired_lock = row.locked_until is not None and row.locked_until <= now
            if expired_lock or row.window_started_at + window <= now:
                row.failures, row.window_started_at, row.locked_until = 0, now, None
            row.failures += 1
            if row.failures >= limit:
                row.locked_until = now + lockout
                locked = True
            row.save()
    return Lockout(max(1, math.ceil(lockout.total_seconds()))) if locked else None


def login_success_record(*, username: str, device: str | None = None) -> None:
    """Forget the failures counted against what this sign-in was judged by: the known ``device``'s
    own counter, or for an unknown client the username's. A known device signing in leaves the
    username's counter (and lock) alone, so its owner's sign-ins do not give a guesser new tries."""
    if device is not None:
        key = _key(ThrottleKind.DEVICE, f"{_normal(username)}:{device}")
    else:
        key = _key(ThrottleKind.USER, _normal(username))
    LoginThrottle.objects.filter(key=key).delete()
