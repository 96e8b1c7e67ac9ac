"""A gateway token's rate limit: a fixed window counted on the token's row (DESIGN.md section 5.12).

``RATCHET_GATEWAY_RATE_LIMIT`` calls per ``RATCHET_GATEWAY_RATE_WINDOW_SECONDS`` seconds, one
counter per token shared by every gateway process. The count is one compare-and-set ``UPDATE``
judged by the database clock (section 4.7: the database is the clock every process shares), whose
``WHERE`` refuses a revoked token and a full window, so two processes counting at once can never
both take the window's last call (STYLE.md rule 1). A call through the gateway does not pay a
transaction of its own for it: :func:`token_count_write` is the statement, and the call's first
checkpoint commit runs it in its own transaction (``runtime.database.statements.RowUpdate``),
where a rowcount other than one rolls the commit back with the typed refusal. Requests that
commit nothing (reads, opening an MCP session) count with :func:`token_count`, the same
statement alone in autocommit mode: one statement, one round trip.

:func:`token_window_check` is the read-only look before any of that: a token whose window is
full is refused without touching anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import router
from django.db.models import Case, DateTimeField, ExpressionWrapper, F, Q, QuerySet, Value, When
from django.db.models.functions import Now

from runtime.database.commit_writes import RowUpdate
from runtime.errors import GatewayRateLimitedError, GatewayTokenError
from runtime.models import GatewayToken


def _limits() -> tuple[int, float]:
    return (int(getattr(settings, "RATCHET_GATEWAY_RATE_LIMIT", 120)),
            float(getattr(settings, "RATCHET_GATEWAY_RATE_WINDOW_SECONDS", 60.0)))


def _window_over(window: float) -> Q:
    """The row's window has passed (or never started), by the database clock."""
    cutoff = ExpressionWrapper(Now() - timedelta(seconds=window), output_field=DateTimeField())
    return Q(window_started_at__isnull=True) | Q(window_started_at__lte=cutoff)


def _count_update(window: float) -> Any:
    def build(s: Mapping[str, Any]) -> tuple[QuerySet[Any], dict[str, Any]]:
        over = _window_over(window)
        queryset = GatewayToken.objects.filter(token_id=s["token_id"], revoked_at__isnull=True).filter(
            over | Q(window_calls__lt=s["limit"]))
        return queryset, {
            "window_calls": Case(When(over, then=Value(1)), default=F("window_calls") + 1),
            "window_started_at": Case(When(over, then=Now()), default=F("window_started_at"),
                                      output_field=DateTimeField())}
    return build


def _refusal(*, token_id: str, limit: int, window: float) -> Exception:
    """Why the count matched no row, from one read: revoked (or gone) or the window is full."""
    row = (GatewayToken.objects.filter(token_id=token_id).annotate(db_now=Now())
           .values("revoked_at", "window_started_at", "db_now").first())
    if row is None or row["revoked_at"] is not None:
        return GatewayTokenError()
    return _limited(token_id=token_id, limit=limit, window=window, started=row["window_started_at"],
                    now=row["db_now"])


def _limited(*, token_id: str, limit: int, window: float, started: datetime | None,
             now: datetime) -> GatewayRateLimitedError:
    passed = (now - started).total_seconds() if started is not None else window
    return GatewayRateLimitedError(token_id=token_id, limit=limit, window_seconds=window,
                                   retry_after=round(max(0.0, window - passed), 1))


def token_count_write(*, token_id: str) -> RowUpdate:
    """The statement that counts one call of ``token_id``, for a checkpoint commit to run in its
    transaction (a ``within`` write of ``runtime.checkpoints.transaction``).

    Its refusal, raised when the commit runs it and no row matched (the commit then writes
    nothing): ``GatewayTokenError`` (revoked since the call's look) or ``GatewayRateLimitedError``
    (the window filled since).
    """
    limit, window = _limits()
    return RowUpdate(alias=router.db_for_write(GatewayToken), shape=("gateway_token_count", window),
                     build=_count_update(window), slots={"token_id": token_id, "limit": limit},
                     refused=lambda: _refusal(token_id=token_id, limit=limit, window=window))


def token_count(*, token_id: str) -> None:
    """Count one request of ``token_id`` on its own: the statement of :func:`token_count_write`
    in autocommit mode (one statement, one transaction).

    Raises:
        GatewayTokenError: the token was revoked (or deleted).
        GatewayRateLimitedError: the window's calls are used up (retryable after ``retry_after`` s).
    """
    token_count_write(token_id=token_id)()


def token_window_check(*, row: GatewayToken, now: datetime) -> None:
    """Refuse a token whose current window is already full, from the row as read (no write).

    Args:
        row: the token row.
        now: the database clock when the row was read (``Now()`` annotated on the same SELECT).

    Raises:
        GatewayRateLimitedError: the window's calls are used up (retryable after ``retry_after`` s).
    """
    limit, window = _limits()
    started = row.window_started_at
    if started is not None and (now - started).total_seconds() < window and row.window_calls >= limit:
        raise _limited(token_id=row.token_id, limit=limit, window=window, started=started, now=now)
