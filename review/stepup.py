"""The password re-entered before a signed action (a review decision, an environment
re-registration): checked against the signed-in person and counted like a sign-in, on the same
counters the sign-in page uses (``review.throttle``; DESIGN.md section 2.5).

A browser that signed in as this person before is a known device and is judged by its own
counter, exactly as on the sign-in page, so a guesser who knows the username cannot lock the
person's own browser out of deciding; anything else counts against the username and the address.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest

from review.throttle import (
    Lockout,
    device_id,
    login_failure_record,
    login_success_record,
    login_throttle_check,
)


@dataclass(frozen=True)
class _Who:
    username: str
    ip: str
    device: str | None


def _who(request: HttpRequest) -> _Who:
    username = request.user.get_username()
    return _Who(username=username, ip=request.META.get("REMOTE_ADDR", ""),
                device=device_id(request=request, username=username))


def stepup_locked(*, request: HttpRequest) -> Lockout | None:
    """The lockout that stops the signed-in person re-entering a password now, or None.

    Args:
        request: a request of a signed-in user (its device cookie and ``REMOTE_ADDR`` are read).

    Returns:
        a :class:`review.throttle.Lockout` (``retry_after_seconds`` >= 1) while the counter this
        request is judged by is locked; while locked the password is not checked at all.
    """
    who = _who(request)
    return login_throttle_check(username=who.username, ip=who.ip, device=who.device)


def stepup_password_check(*, request: HttpRequest, password: str) -> tuple[bool, Lockout | None]:
    """Check ``password`` against the signed-in person and count the attempt like a sign-in.

    Call :func:`stepup_locked` first: this function does not refuse a locked client itself.

    Args:
        request: a request of a signed-in user.
        password: the password as typed (never logged).

    Returns:
        ``(True, None)`` when it is the person's password (their counter is cleared);
        ``(False, lockout or None)`` otherwise, the lockout being the one this failure triggered.
    """
    who = _who(request)
    if not request.user.check_password(password):
        return False, login_failure_record(username=who.username, ip=who.ip, device=who.device)
    login_success_record(username=who.username, device=who.device)
    return True, None
