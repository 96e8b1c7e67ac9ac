"""Gateway tokens: issue, authorise, rate-limit, revoke (DESIGN.md section 5.12).

A token is ``rgw_<token id>_<secret>``. Only ``sha256(secret)`` is stored (the secret is 32
random bytes, so a plain digest is enough), compared in constant time. A token belongs to one
tenant and one run, optionally to some of its action kinds; it authorises the gateway only (the
dashboard never reads it, and a dashboard session never authorises the gateway). A revoked
token is refused by the next call: every call reads the row. Errors and logs name the token id,
never the token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from runtime.errors import GatewayRateLimitedError, GatewayScopeError, GatewayTokenError, RunNotFoundError
from runtime.models import GatewayToken, Run

PREFIX = "rgw_"


@dataclass(frozen=True)
class IssuedToken:
    """A freshly issued token: ``token`` is shown once and never stored."""

    token_id: str
    token: str
    run_id: str


def _digest(secret: str) -> str:
    return "sha256:" + hashlib.sha256(secret.encode("utf-8")).hexdigest()


def token_issue(*, run_id: str, agent: str = "", actions: list[str] | None = None) -> IssuedToken:
    """Issue a token for ``run_id`` (its tenant), limited to ``actions`` when given.

    Raises:
        RunNotFoundError: no such run.
    """
    run = Run.objects.filter(run_id=run_id).first()
    if run is None:
        raise RunNotFoundError(run_id=run_id)
    token_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    GatewayToken.objects.create(token_id=token_id, secret_digest=_digest(secret), tenant_id=run.tenant_id,
                                run=run, agent=agent[:200], actions=list(actions or []))
    return IssuedToken(token_id=token_id, token=f"{PREFIX}{token_id}_{secret}", run_id=run_id)


def token_revoke(*, token_id: str) -> bool:
    """Revoke ``token_id`` at once; returns whether a live token was revoked."""
    return GatewayToken.objects.filter(token_id=token_id, revoked_at__isnull=True).update(revoked_at=Now()) > 0


def token_authorise(*, token: str | None, run_id: str | None = None, action_kind: str | None = None) -> GatewayToken:
    """The live token row for ``token``, checked against ``run_id`` and ``action_kind``.

    Raises:
        GatewayTokenError: missing, malformed, unknown or revoked (all alike: nothing to probe).
        GatewayScopeError: the token is for another run, or does not cover ``action_kind``.
    """
    if not token or not token.startswith(PREFIX) or token.count("_") < 2:
        raise GatewayTokenError()
    token_id, _, secret = token[len(PREFIX):].partition("_")
    row = GatewayToken.objects.filter(token_id=token_id).select_related("run").first()
    if row is None or row.revoked_at is not None or not hmac.compare_digest(row.secret_digest, _digest(secret)):
        raise GatewayTokenError()
    if row.tenant_id != row.run.tenant_id or (run_id is not None and row.run_id != run_id):
        raise GatewayScopeError(token_id=row.token_id, run_id=run_id)
    if action_kind is not None and row.actions and action_kind not in row.actions:
        raise GatewayScopeError("the token does not cover this action", token_id=row.token_id, run_id=run_id,
                                action=action_kind)
    return row


def token_rate_check(*, row: GatewayToken) -> None:
    """Count one call against the token's fixed window; refuse past the limit.

    ``RATCHET_GATEWAY_RATE_LIMIT`` calls per ``RATCHET_GATEWAY_RATE_WINDOW_SECONDS`` seconds,
    counted on the token's row under a row lock (one counter for every gateway process).

    Raises:
        GatewayRateLimitedError: the window's calls are used up (retryable after ``retry_after`` s).
    """
    limit = int(getattr(settings, "RATCHET_GATEWAY_RATE_LIMIT", 120))
    window = float(getattr(settings, "RATCHET_GATEWAY_RATE_WINDOW_SECONDS", 60.0))
    with transaction.atomic():
        locked = GatewayToken.objects.select_for_update().get(token_id=row.token_id)
        now = timezone.now()
        started = locked.window_started_at
        if started is None or now - started >= timedelta(seconds=window):
            locked.window_started_at, locked.window_calls = now, 1
        elif locked.window_calls >= limit:
            retry = max(0.0, window - (now - started).total_seconds())
            raise GatewayRateLimitedError(token_id=row.token_id, limit=limit, window_seconds=window,
                                          retry_after=round(retry, 1))
        else:
            locked.window_calls += 1
        locked.save(update_fields=["window_started_at", "window_calls"])


def tokens_for_run(*, run_id: str) -> list[GatewayToken]:
    """The run's tokens, newest first (for the dashboard and the command)."""
    return list(GatewayToken.objects.filter(run_id=run_id).order_by("-created_at", "token_id"))
