"""Repeating a request Ratchet did not answer for good (sync and async), shared by the framework
integrations.

An error whose ``retryable`` is True (no answer came, ``run_busy``, ``rate_limited``, a server
failure it marks so) may succeed later with the same call id, which never repeats an effect
(Ratchet's DESIGN.md sections 5.12 and 5.13). :class:`~ratchet_client.errors.ApprovalWaitTimeout`
is the exception: it is the caller's own wait that ran out, so it is raised at once.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from ratchet_client.errors import ApprovalWaitTimeout, RatchetError

T = TypeVar("T")


def repeatable(exc: RatchetError) -> bool:
    """Whether ``exc`` says the same request may succeed later (``retryable``, not a wait that ran out)."""
    return exc.retryable and not isinstance(exc, ApprovalWaitTimeout)


def _pause(exc: RatchetError, pause: float, left: float) -> float:
    """The pause before the next attempt: the server's ``retry_after`` when it gave one, within ``left``."""
    after = exc.context.get("retry_after")
    wanted = float(after) if isinstance(after, int | float) and not isinstance(after, bool) and after > 0 else pause
    return max(0.0, min(wanted, left))


def retrying(attempt: Callable[[], T], *, seconds: float, pause: float = 0.5) -> T:
    """``attempt()``, repeated while it raises a :func:`repeatable` error, for up to ``seconds``
    after the first such error.

    Args:
        attempt: one request (it must be safe to repeat: the same call id, or a read).
        seconds: how long to keep repeating after the first retryable error (0: never).
        pause: seconds between two attempts (the server's ``retry_after`` when it gives one).

    Raises:
        RatchetError: the first error that is not retryable, or the last one once ``seconds`` passed.
    """
    deadline: float | None = None
    while True:
        try:
            return attempt()
        except RatchetError as exc:
            now = time.monotonic()
            deadline = now + seconds if deadline is None else deadline
            if not repeatable(exc) or now >= deadline:
                raise
            time.sleep(_pause(exc, pause, deadline - now))


async def retrying_async(attempt: Callable[[], Awaitable[T]], *, seconds: float, pause: float = 0.5) -> T:
    """As :func:`retrying`, for a coroutine; waits without blocking the event loop."""
    deadline: float | None = None
    while True:
        try:
            return await attempt()
        except RatchetError as exc:
            now = time.monotonic()
            deadline = now + seconds if deadline is None else deadline
            if not repeatable(exc) or now >= deadline:
                raise
            await anyio.sleep(_pause(exc, pause, deadline - now))
