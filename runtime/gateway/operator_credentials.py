"""Operator credentials: who may start and cancel runs and issue and revoke gateway tokens through
the JSON API, in one tenant (DESIGN.md section 5.13).

A credential is ``rop_<credential id>_<secret>``; only ``sha256(secret)`` is stored and compared
in constant time, as for gateway tokens (section 5.12). It is another kind of bearer than an
agent's token: the agent endpoints refuse it (its prefix is not ``rgw_``) and the operator
endpoints refuse a gateway token, so an agent can never mint itself a token or start a run. Every
run and token it names must be its tenant's; another tenant's and a missing one get the same
answer. Errors and logs name the credential id, never the credential.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db.models.functions import Now

from runtime.errors import (
    GatewayInputError,
    GatewayRunsNotEnabledError,
    GatewayScopeError,
    GatewayTokenError,
    GatewayTokenMissingError,
)
from runtime.gateway.tokens import IssuedToken, token_issue, token_issue_agent, token_revoke
from runtime.models import GatewayToken, OperatorCredential, Run

PREFIX = "rop_"


@dataclass(frozen=True)
class IssuedCredential:
    """A freshly issued operator credential: ``credential`` is shown once and never stored."""

    credential_id: str
    credential: str
    tenant_id: str


def _digest(secret: str) -> str:
    return "sha256:" + hashlib.sha256(secret.encode("utf-8")).hexdigest()


def credential_issue(*, tenant_id: str, name: str = "") -> IssuedCredential:
    """Issue an operator credential for ``tenant_id`` (``manage.py operator_credentials issue``).

    Raises:
        GatewayInputError: an empty tenant.
    """
    if not tenant_id.strip():
        raise GatewayInputError("an operator credential needs a tenant")
    credential_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    OperatorCredential.objects.create(credential_id=credential_id, secret_digest=_digest(secret),
                                      tenant_id=tenant_id[:200], name=name[:200])
    return IssuedCredential(credential_id=credential_id, credential=f"{PREFIX}{credential_id}_{secret}",
                            tenant_id=tenant_id)


def credential_revoke(*, credential_id: str) -> bool:
    """Revoke ``credential_id`` at once; returns whether a live credential was revoked."""
    return OperatorCredential.objects.filter(credential_id=credential_id, revoked_at__isnull=True).update(
        revoked_at=Now()) > 0


def credential_authorise(*, credential: str | None) -> OperatorCredential:
    """The live credential row for ``credential``.

    Raises:
        GatewayTokenMissingError: nothing was sent.
        GatewayTokenError: malformed, unknown, revoked, or a gateway token (all alike).
    """
    if not credential:
        raise GatewayTokenMissingError("no credential: send Authorization: Bearer <operator credential>")
    if not credential.startswith(PREFIX) or credential.count("_") < 2:
        raise GatewayTokenError("the operator credential is unknown, revoked or not one")
    credential_id, _, secret = credential[len(PREFIX):].partition("_")
    row = OperatorCredential.objects.filter(credential_id=credential_id).first()
    if row is None or row.revoked_at is not None or not hmac.compare_digest(row.secret_digest, _digest(secret)):
        raise GatewayTokenError("the operator credential is unknown, revoked or not one")
    return row


def tenant_run(*, row: OperatorCredential, run_id: str) -> Run:
    """The run ``run_id`` when it is the credential's tenant's.

    Raises:
        GatewayScopeError: another tenant's run or no such run (one answer: nothing to probe).
    """
    run = Run.objects.filter(run_id=run_id).first()
    if run is None or run.tenant_id != row.tenant_id:
        raise GatewayScopeError("the credential's tenant has no such run", credential_id=row.credential_id,
                                run_id=run_id[:64])
    return run


def tenant_token_issue(*, row: OperatorCredential, run_id: str | None = None, run_ids: list[str] | None = None,
                       task_id: str = "", agent: str = "", actions: list[str] | None = None) -> IssuedToken:
    """A gateway token for one run (``run_id``) or, per agent, several runs or a task of the tenant.

    Raises:
        GatewayScopeError: a run that is not the tenant's.
        GatewayTokenScopeInvalidError: a per-agent token with neither or both of runs and task.
    """
    if run_id:
        tenant_run(row=row, run_id=run_id)
        return token_issue(run_id=run_id, agent=agent, actions=actions)
    for listed in run_ids or []:
        tenant_run(row=row, run_id=listed)
    return token_issue_agent(tenant_id=row.tenant_id, agent=agent, run_ids=run_ids, task_id=task_id,
                             actions=actions)


def tenant_token_revoke(*, row: OperatorCredential, token_id: str) -> bool:
    """Revoke the tenant's gateway token ``token_id``; returns whether a live token was revoked.

    Raises:
        GatewayScopeError: no such token in the tenant (another tenant's is reported alike).
    """
    if not GatewayToken.objects.filter(token_id=token_id[:32], tenant_id=row.tenant_id).exists():
        raise GatewayScopeError("the credential's tenant has no such token", credential_id=row.credential_id)
    return token_revoke(token_id=token_id[:32])


def task_spec_path(*, name: str) -> Path:
    """The task spec ``<name>.toml`` in ``RATCHET_API_TASK_SPECS_DIR`` that a run is started from.

    Only names, never paths: an API caller chooses among the specs an operator put there.

    Raises:
        GatewayRunsNotEnabledError: the setting is empty.
        GatewayInputError: the name is not a plain name, or no such spec.
    """
    folder = str(getattr(settings, "RATCHET_API_TASK_SPECS_DIR", "") or "")
    if not folder:
        raise GatewayRunsNotEnabledError()
    if not name or len(name) > 100 or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise GatewayInputError("a task spec is named by letters, digits and - _ . only", task=name[:100])
    path = Path(folder) / f"{name}.toml"
    if not path.is_file():
        raise GatewayInputError("no task spec of that name", task=name[:100])
    return path
