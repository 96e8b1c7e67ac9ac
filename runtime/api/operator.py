"""``/api/v1/operator/``: start and cancel runs, issue and revoke gateway tokens, in one tenant.

Thin views over :mod:`runtime.gateway.operator_credentials` (DESIGN.md section 5.13). Only
``Authorization: Bearer <operator credential>`` (``rop_...``) authorises; an agent's gateway token
(``rgw_...``) is refused here exactly like an unknown credential, and an operator credential is
refused by the agent endpoints. A new token's secret is in the answer once and never again.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema, Status
from ninja.security import HttpBearer
from pydantic import Field

from runtime.decisions.cancellation import run_request_cancel
from runtime.engine import run_start
from runtime.gateway.calls import dashboard_url
from runtime.gateway.operator_credentials import (
    credential_authorise,
    task_spec_path,
    tenant_run,
    tenant_token_issue,
    tenant_token_revoke,
)
from runtime.models import OperatorCredential

router = Router(tags=["operator"])


class OperatorBearer(HttpBearer):
    """An operator credential in ``Authorization: Bearer``; ``request.auth`` is its row."""

    def authenticate(self, request: HttpRequest, token: str) -> OperatorCredential:
        return credential_authorise(credential=token)


class RunIn(Schema):
    """Start a run of the task spec ``task`` (a name in ``RATCHET_API_TASK_SPECS_DIR``) in the
    credential's tenant."""

    task: str = Field(min_length=1, max_length=100)


class RunOut(Schema):
    run_id: str
    tenant_id: str
    phase: str
    stop_reason: str | None = None
    dashboard_url: str


class TokenIn(Schema):
    """A gateway token for ``run_id``; or a per-agent token for ``run_ids`` or every run of ``task_id``."""

    run_id: str | None = Field(default=None, max_length=64)
    run_ids: list[str] = Field(default_factory=list, max_length=500)
    task_id: str = Field(default="", max_length=200)
    agent: str = Field(default="", max_length=200)
    actions: list[str] = Field(default_factory=list, max_length=50)


class TokenOut(Schema):
    token_id: str
    token: str = Field(description="the secret, shown this once: it is never stored or shown again")
    run_id: str | None = None


class RevokedOut(Schema):
    token_id: str | None = None
    run_id: str | None = None
    revoked: bool
    phase: str | None = None


def _run_out(run: Any) -> dict[str, Any]:
    return {"run_id": run.run_id, "tenant_id": run.tenant_id, "phase": run.phase,
            "stop_reason": run.stop_reason or None, "dashboard_url": dashboard_url(run_id=run.run_id)}


def operator_routes(errors: dict[int, Any]) -> Router:
    """The router with its routes, their error bodies described as ``errors`` (status -> schema)."""

    @router.post("/runs", auth=OperatorBearer(), response={201: RunOut, **errors})
    def run_create(request: HttpRequest, body: RunIn) -> Status:
        """Start a run of a named task spec in the credential's tenant (it waits for its agent's calls)."""
        run_id = run_start(spec_path=task_spec_path(name=body.task), tenant_id=request.auth.tenant_id)
        return Status(201, _run_out(tenant_run(row=request.auth, run_id=run_id)))

    @router.get("/runs/{run_id}", auth=OperatorBearer(), response={200: RunOut, **errors})
    def run_read(request: HttpRequest, run_id: str) -> dict[str, Any]:
        """One run of the tenant: phase, stop reason, dashboard link."""
        return _run_out(tenant_run(row=request.auth, run_id=run_id))

    @router.post("/runs/{run_id}/cancel", auth=OperatorBearer(), response={200: RevokedOut, **errors})
    def run_cancel(request: HttpRequest, run_id: str) -> dict[str, Any]:
        """Cancel a run of the tenant (a write in flight is settled first; an ended run stays as it is)."""
        tenant_run(row=request.auth, run_id=run_id)
        phase = run_request_cancel(run_id=run_id, requested_by=f"operator-credential:{request.auth.credential_id}")
        return {"run_id": run_id, "revoked": True, "phase": phase}

    @router.post("/tokens", auth=OperatorBearer(), response={201: TokenOut, **errors})
    def token_create(request: HttpRequest, body: TokenIn) -> Status:
        """Issue a gateway token in the tenant; its secret is in this answer only."""
        issued = tenant_token_issue(row=request.auth, run_id=body.run_id, run_ids=body.run_ids,
                                    task_id=body.task_id, agent=body.agent, actions=body.actions)
        return Status(201, {"token_id": issued.token_id, "token": issued.token, "run_id": issued.run_id})

    @router.delete("/tokens/{token_id}", auth=OperatorBearer(), response={200: RevokedOut, **errors})
    def token_delete(request: HttpRequest, token_id: str) -> dict[str, Any]:
        """Revoke a gateway token of the tenant; the agent's next call is refused."""
        return {"token_id": token_id, "revoked": tenant_token_revoke(row=request.auth, token_id=token_id)}

    return router

