"""Gateway tokens: issue, authorise, rate-limit, revoke (DESIGN.md section 5.12).

A token is ``rgw_<token id>_<secret>``. Only ``sha256(secret)`` is stored (the secret is 32
random bytes, so a plain digest is enough), compared in constant time. A token belongs to one
tenant and either one run (per-run) or several runs of that tenant (per-agent: a list of runs,
or every run of one task, present and future), optionally to some action kinds; a run of
another tenant is never in its scope, whatever the list says. It authorises the gateway only (the
dashboard never reads it, and a dashboard session never authorises the gateway). A revoked
token is refused by the next call: every call reads the row. Errors and logs name the token id,
never the token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from django.db import models
from django.db.models.functions import Now

from runtime.errors import (
    GatewayScopeError,
    GatewayTokenError,
    GatewayTokenMissingError,
    GatewayTokenScopeInvalidError,
    RunNotFoundError,
)
from runtime.gateway.rate_limits import token_count, token_window_check
from runtime.models import GatewayToken, Run

PREFIX = "rgw_"


@dataclass(frozen=True)
class IssuedToken:
    """A freshly issued token: ``token`` is shown once and never stored."""

    token_id: str
    token: str
    run_id: str | None
    """The run of a per-run token; None for a per-agent token."""


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


def token_issue_agent(*, tenant_id: str, agent: str, run_ids: list[str] | None = None, task_id: str = "",
                      actions: list[str] | None = None) -> IssuedToken:
    """Issue a per-agent token for several runs of ``tenant_id`` (DESIGN.md section 5.12).

    Args:
        tenant_id: the one tenant every run in scope belongs to.
        agent: the agent's name (shown in the dashboard).
        run_ids: these runs (each must exist in ``tenant_id``); or
        task_id: every run of this task in ``tenant_id``, including runs started later.
        actions: limit the token to these action kinds (empty: every kind each run allows).

    Raises:
        GatewayTokenScopeInvalidError: neither or both of ``run_ids`` and ``task_id``.
        RunNotFoundError: a run that does not exist in ``tenant_id`` (another tenant's run is
            reported exactly like a missing one).
    """
    runs = sorted(set(run_ids or []))
    if bool(runs) == bool(task_id):
        raise GatewayTokenScopeInvalidError(tenant_id=tenant_id)
    found = set(Run.objects.filter(tenant_id=tenant_id, run_id__in=runs).values_list("run_id", flat=True))
    missing = [r for r in runs if r not in found]
    if missing:
        raise RunNotFoundError(run_id=missing[0])
    token_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    GatewayToken.objects.create(token_id=token_id, secret_digest=_digest(secret), tenant_id=tenant_id, run=None,
                                run_ids=runs, task_id=task_id[:200], agent=agent[:200], actions=list(actions or []))
    return IssuedToken(token_id=token_id, token=f"{PREFIX}{token_id}_{secret}", run_id=None)


def token_covers(*, row: GatewayToken, run: Run) -> bool:
    """Whether the token's scope holds ``run``: same tenant, and its run, one of its runs or a
    run of its task."""
    if run.tenant_id != row.tenant_id:
        return False
    if row.run_id is not None:
        return row.run_id == run.run_id
    return run.run_id in (row.run_ids or []) or (bool(row.task_id) and run.task_id == row.task_id)


def token_runs(*, row: GatewayToken) -> list[str]:
    """The run ids a token may act on now, oldest first (per-agent: at most 500)."""
    if row.run_id is not None:
        return [row.run_id]
    runs = Run.objects.filter(tenant_id=row.tenant_id)
    runs = runs.filter(task_id=row.task_id) if row.task_id else runs.filter(run_id__in=list(row.run_ids or []))
    return list(runs.order_by("created_at", "run_id").values_list("run_id", flat=True)[:500])


def token_revoke(*, token_id: str) -> bool:
    """Revoke ``token_id`` at once; returns whether a live token was revoked."""
    return GatewayToken.objects.filter(token_id=token_id, revoked_at__isnull=True).update(revoked_at=Now()) > 0


def token_authorise(*, token: str | None, run_id: str | None = None, action_kind: str | None = None) -> GatewayToken:
    """The live token row for ``token``, checked against ``run_id`` and ``action_kind``.

    Raises:
        GatewayTokenMissingError: no token was sent at all.
        GatewayTokenError: malformed, unknown or revoked (all alike: nothing to probe).
        GatewayScopeError: the token is for another run, or does not cover ``action_kind``.
    """
    _well_formed(token)
    row = GatewayToken.objects.filter(token_id=token[len(PREFIX):].partition("_")[0]).select_related("run").first()
    _check(row, token, run_id, action_kind)
    return row


def _well_formed(token: str | None) -> None:
    """Refuse a missing token with its own error (the caller forgot the header) and a malformed
    one exactly like an unknown one (nothing to probe)."""
    if not token:
        raise GatewayTokenMissingError()
    if not token.startswith(PREFIX) or token.count("_") < 2:
        raise GatewayTokenError()


def _check(row: GatewayToken | None, token: str, run_id: str | None, action_kind: str | None) -> Run | None:
    """The run ``run_id`` names when the token is live and covers it (None without ``run_id``)."""
    secret = token[len(PREFIX):].partition("_")[2]
    if row is None or row.revoked_at is not None or not hmac.compare_digest(row.secret_digest, _digest(secret)):
        raise GatewayTokenError()
    return _scope(row, run_id, action_kind)


def _scope(row: GatewayToken, run_id: str | None, action_kind: str | None) -> Run | None:
    """The run ``run_id`` names when the authorised ``row`` covers it (None without ``run_id``)."""
    run: Run | None = None
    if row.run_id is not None:
        run = row.run
        if run.tenant_id != row.tenant_id or (run_id is not None and run.run_id != run_id):
            raise GatewayScopeError(token_id=row.token_id, run_id=run_id)
    elif run_id is not None:
        # A run of another tenant, outside the list or missing: one answer, nothing to probe.
        run = Run.objects.filter(run_id=run_id).first()
        if run is None or not token_covers(row=row, run=run):
            raise GatewayScopeError(token_id=row.token_id, run_id=run_id)
    if action_kind is not None and row.actions and action_kind not in row.actions:
        raise GatewayScopeError("the token does not cover this action", token_id=row.token_id, run_id=run_id,
                                action=action_kind)
    return run if run_id is not None else None


def token_admit(*, token: str | None = None, run_id: str, action_kind: str | None = None,
                admitted: GatewayToken | None = None) -> tuple[GatewayToken, Run]:
    """:func:`token_request_admit` with the run scope checked (DESIGN.md section 5.12).

    A request the JSON API or the MCP server already authorised passes its row as ``admitted``
    (:func:`token_request_check` or :func:`token_request_admit`): the token is then neither read
    nor counted again, only the run scope is checked on that row.

    Returns:
        ``(token row, the run)``: the run ``run_id`` names, in the token's scope.

    Raises:
        GatewayTokenMissingError / GatewayTokenError / GatewayScopeError: as
            :func:`token_authorise` (nothing is counted).
        GatewayRateLimitedError: as ``runtime.gateway.rate_limits.token_count``.
    """
    if admitted is not None:
        return admitted, _scope(admitted, run_id, action_kind)  # type: ignore[return-value]
    row = token_request_check(token=token)
    run = _scope(row, run_id, action_kind)
    token_count(token_id=row.token_id)
    return row, run  # type: ignore[return-value]  # _scope returns the run when run_id is given


def token_request_check(*, token: str | None) -> GatewayToken:
    """Authorise ``token`` without counting it: one read, no transaction (DESIGN.md section 5.12).

    The JSON API's and the MCP server's call path use it: the call's first checkpoint commit
    counts the call (``runtime.gateway.rate_limits.token_count_write``), so admission costs no
    durable transaction of its own. A revoked token or a full window is refused here, before
    anything; one revoked or filled after this read is refused by that commit, which then writes
    nothing.

    Raises:
        GatewayTokenMissingError / GatewayTokenError: as :func:`token_authorise`.
        GatewayRateLimitedError: the token's window is already full (nothing counted).
    """
    _well_formed(token)
    row = (GatewayToken.objects.filter(token_id=token[len(PREFIX):].partition("_")[0])  # type: ignore[index]
           .select_related("run").annotate(db_now=Now()).first())
    _check(row, token, None, None)  # type: ignore[arg-type]
    token_window_check(row=row, now=row.db_now)  # type: ignore[union-attr]
    return row  # type: ignore[return-value]  # _check refused a missing row


def token_request_admit(*, token: str | None) -> GatewayToken:
    """Authorise ``token`` and count one request against its rate limit: one read and one
    compare-and-set (``runtime.gateway.rate_limits``), one transaction.

    Reads and the opening of an MCP session, which commit nothing a count could ride in, use it;
    they hand the row to the services (``admitted=``), so a request reads the token row once
    (DESIGN.md section 5.12).

    Raises:
        GatewayTokenMissingError / GatewayTokenError: as :func:`token_authorise`.
        GatewayRateLimitedError: as ``runtime.gateway.rate_limits.token_count``.
    """
    row = token_request_check(token=token)
    token_count(token_id=row.token_id)
    return row


def tokens_for_run(*, run_id: str) -> list[GatewayToken]:
    """The tokens that cover the run -- its own and the per-agent tokens of its tenant whose scope
    holds it -- newest first (for the dashboard and the command)."""
    run = Run.objects.filter(run_id=run_id).first()
    if run is None:
        return []
    rows = GatewayToken.objects.filter(tenant_id=run.tenant_id).filter(
        models.Q(run_id=run_id) | models.Q(run__isnull=True)).order_by("-created_at", "token_id")
    return [row for row in rows if token_covers(row=row, run=run)]
