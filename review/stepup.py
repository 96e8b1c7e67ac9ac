"""The password re-entered before a signed action (a review decision, an environment
re-registration): checked against the signed-in person and counted like a sign-in, on the same
counters the sign-in page uses (``review.throttle``; DESIGN.md section 2.5).

A browser that signed in as this person before is a known device and is judged by its own
counter, exactly as on the sign-in page, so a guesser who knows the username cannot lock the
person's own browser out of deciding; anything else counts against the username and the address.
"""

from __future__ import annotations

from django.http import HttpRequest

from review.throttle import (
    Lockout,
    device_id,
    login_failure_record,
    login_success_record,
    login_throttle_check,
)


def _who(request: HttpRequest) -> tuple[str, str, str | None]:
    """``(username, client address, known device id or None)`` of a signed-in request."""
    username = request.user.get_username()
    return username, request.META.get("REMOTE_ADDR", ""), device_id(request=request, username=username)


def stepup_locked(*, request: HttpRequest) -> Lockout | None:
    """The lockout that stops the signed-in person re-entering a password now, or None.

    Args:
        request: a request of a signed-in user (its device cookie and ``REMOTE_ADDR`` are read).

    Returns:
        a :class:`review.throttle.Lockout` (``retry_after_seconds`` >= 1) while the counter this
        request is judged by is locked; while locked the password is not checked at all.
    """
    username, ip, device = _who(request)
    return login_throttle_check(username=username, ip=ip, device=device)


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
    username, ip, device = _who(request)
    if not request.user.check_password(password):
        return False, login_failure_record(username=username, ip=ip, device=device)
    login_success_record(username=username, device=device)
    return True, None
