"""Failed sign-in throttling: password guessing is slowed per username and per client address.

Two counters per attempt: one for the username, one for the client address (``REMOTE_ADDR``).
``RATCHET_LOGIN_MAX_FAILURES`` failures for a username (or ``RATCHET_LOGIN_MAX_FAILURES_PER_IP``
for an address) within ``RATCHET_LOGIN_WINDOW_SECONDS`` lock that username (address) for
``RATCHET_LOGIN_LOCKOUT_SECONDS``. While locked, credentials are not even checked, so guessing
stops paying; a success clears the username counter but not the address counter, so one valid
account cannot be used to reset an address that is guessing others.

Why the database and not the cache: Django's default cache is per process, so with several web
workers an attacker would get the limit once per worker; the database is shared by every worker
on every machine, needs no extra service and behaves the same on SQLite and PostgreSQL. Only the
dashboard's own ``LoginThrottle`` table is written, never a runtime table.

Behind a reverse proxy every request has the proxy's address; raise the per-address limit there
(or set it very high) and rely on the per-username limit.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from review.models import LoginThrottle, ThrottleKind


@dataclass(frozen=True)
class Lockout:
    """Sign-in is refused; ``retry_after_seconds`` (>= 1) until the lock lifts."""

    retry_after_seconds: int


def _key(kind: ThrottleKind, value: str) -> str:
    return hashlib.sha256(f"{kind.value}:{value}".encode()).hexdigest()


def _keys(*, username: str, ip: str) -> dict[str, tuple[ThrottleKind, int]]:
    return {
        _key(ThrottleKind.USER, username.strip().lower()): (
            ThrottleKind.USER,
            settings.RATCHET_LOGIN_MAX_FAILURES,
        ),
        _key(ThrottleKind.IP, ip): (ThrottleKind.IP, settings.RATCHET_LOGIN_MAX_FAILURES_PER_IP),
    }


def login_throttle_check(*, username: str, ip: str) -> Lockout | None:
    """Return a :class:`Lockout` if ``username`` or ``ip`` is locked now, else ``None``.

    Args:
        username: as typed (compared case-insensitively, stripped).
        ip: the client address (``REMOTE_ADDR``).
    """
    now = timezone.now()
    until = (
        LoginThrottle.objects.filter(
            key__in=list(_keys(username=username, ip=ip)), locked_until__gt=now
        )
        .order_by("-locked_until")
        .values_list("locked_until", flat=True)
        .first()
    )
    if until is None:
        return None
    return Lockout(max(1, math.ceil((until - now).total_seconds())))


def login_failure_record(*, username: str, ip: str) -> Lockout | None:
    """Count one failed sign-in for ``username`` and ``ip``; return the lockout it triggers, if any.

    A counter whose window (``RATCHET_LOGIN_WINDOW_SECONDS``) or lock has run out starts again
    from zero.
    """
    now = timezone.now()
    window = timedelta(seconds=settings.RATCHET_LOGIN_WINDOW_SECONDS)
    lockout = timedelta(seconds=settings.RATCHET_LOGIN_LOCKOUT_SECONDS)
    locked = False
    with transaction.atomic():
        for key, (kind, limit) in _keys(username=username, ip=ip).items():
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


def login_success_record(*, username: str) -> None:
    """Forget the failures counted against ``username`` after it signed in."""
    LoginThrottle.objects.filter(key=_key(ThrottleKind.USER, username.strip().lower())).delete()
