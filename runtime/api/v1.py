"""``/api/v1/``: an agent's runs, calls, receipts and status, over HTTP with a bearer token.

Thin views over :mod:`runtime.gateway` (DESIGN.md section 5.12). Only ``Authorization: Bearer
<gateway token>`` authorises: the dashboard's session cookie is never read here, and a gateway
token never opens the dashboard. Every refusal is ``{"error": {"code", "message", "hint",
"retryable"}}`` with the status of its :class:`~runtime.errors.GatewayError`; the token is never
echoed. The OpenAPI description is served at ``/api/v1/openapi.json`` and read as a page at
``/api/v1/docs`` (Swagger UI): both describe, neither authorises -- every call made from the page
needs the bearer token like any other client, and the dashboard's session never authorises one.
The operator endpoints (start and cancel runs, issue and revoke tokens) are under
``/api/v1/operator/`` (:mod:`runtime.api.operator`, DESIGN.md section 5.13).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import HttpBearer
from pydantic import Field, JsonValue

from runtime.api.operator import operator_routes
from runtime.errors import (
    GatewayError,
    GatewayMalformedRequestError,
    GatewayNotFoundError,
    GatewayPayloadTooLargeError,
    GatewayTokenMissingError,
    RatchetError,
)
from runtime.gateway.calls import CallResult, call_submit
from runtime.gateway.reads import approval_pending, call_get, receipts_list, run_status
from runtime.gateway.tokens import token_request_admit, token_request_check, token_runs
from runtime.gateway.tools import MAX_CALL_BYTES
from runtime.gateway.workspace_reads import workspace_list, workspace_read
from runtime.models import GatewayToken

api = NinjaAPI(title="Ratchet agent gateway", version="1", urls_namespace="api-v1", docs_url="/docs",
               description="Exactly-once, approval-gated tool calls for agents outside the process "
                           "(DESIGN.md section 5.12).")


class GatewayBearer(HttpBearer):
    """A gateway token in ``Authorization: Bearer``; the body size is checked before it is parsed.

    The token row is read and checked here, once per request; ``request.auth`` is that row and
    the services check only the run scope on it. ``counted`` (reads): the request is also counted
    against the rate limit here; a call (``counted=False``) is counted by its first checkpoint
    commit instead, so admission costs it no transaction (DESIGN.md section 5.12).
    """

    def __init__(self, *, counted: bool = True) -> None:
        super().__init__()
        self.counted = counted

    def authenticate(self, request: HttpRequest, token: str) -> GatewayToken:
        limit = int(getattr(settings, "RATCHET_GATEWAY_MAX_BYTES", MAX_CALL_BYTES)) + 4096
        if request_length(request) > limit:
            raise GatewayPayloadTooLargeError(limit_bytes=limit)
        return token_request_admit(token=token) if self.counted else token_request_check(token=token)


def request_length(request: HttpRequest) -> int:
    """The request's ``Content-Length`` in bytes (0 when absent).

    Raises:
        GatewayMalformedRequestError: the header is not a non-negative whole number.
    """
    raw = str(request.META.get("CONTENT_LENGTH") or "0").strip()
    if not raw.isdigit() or len(raw) > 18:
        raise GatewayMalformedRequestError("Content-Length is not a number of bytes")
    return int(raw)


def api_not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Any path under ``/api/v1/`` the API has no route for: the gateway's JSON 404, never the
    HTML page (a call id with ``/`` or ``%2F`` in it ends up here, DESIGN.md section 5.12)."""
    err = GatewayNotFoundError()
    return JsonResponse({"error": {"code": err.code, "message": err.message, "hint": err.hint,
                                   "retryable": False, "context": {}}}, status=err.status)


def _error(request: HttpRequest, status: int, code: str, message: str, hint: str = "",
           retryable: bool = False, context: dict[str, Any] | None = None) -> HttpResponse:
    body = {"error": {"code": code, "message": message, "hint": hint, "retryable": retryable,
                      "context": context or {}}}
    return api.create_response(request, body, status=status)


@api.exception_handler(GatewayError)
def _gateway_error(request: HttpRequest, exc: GatewayError) -> HttpResponse:
    return _error(request, exc.status, exc.code, exc.message, exc.hint, exc.retryable, exc.context)


@api.exception_handler(RatchetError)
def _runtime_error(request: HttpRequest, exc: RatchetError) -> HttpResponse:
    return _error(request, 500, "runtime_error", f"{type(exc).__name__}: {exc.message}", exc.hint, exc.retryable,
                  {k: v for k, v in exc.context.items() if k in ("run_id", "generation", "call_id")})


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    # django-ninja calls authenticate only with a bearer token in the header: this is a request
    # without one (no header, another scheme, an empty token), which says so, not "unknown token".
    err = GatewayTokenMissingError()
    return _error(request, err.status, err.code, err.message, err.hint)


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if exc.status_code == 400:  # django-ninja could not parse the body
        return _error(request, 400, "malformed_json", "the request body is not valid JSON",
                      "send a JSON object; nothing was recorded")
    return _error(request, exc.status_code, "http_error", str(exc.message)[:200])


@api.exception_handler(ValidationError)
def _invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    fields = [{"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", ""))[:200]} for e in exc.errors]
    malformed = any(e.get("type") == "json_invalid" or "JSON" in str(e.get("msg", "")) for e in exc.errors)
    return _error(request, 400 if malformed else 422, "malformed_json" if malformed else "invalid_input",
                  "the request body is not valid JSON" if malformed else "the request fails the schema",
                  "fix the request; nothing was recorded", context={"fields": fields[:20]})


class CallIn(Schema):
    """One tool call: the caller's own ``call_id`` (repeat it to get the same result; left out,
    the gateway derives one from the run, the tool and the arguments), the tool (an action the
    run offers, or ``finish``) and its arguments."""

    call_id: str | None = Field(default=None, min_length=1, max_length=64,
                                pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
    tool: str = Field(min_length=1, max_length=200)
    arguments: dict[str, JsonValue] = Field(default_factory=dict)


class ErrorBody(Schema):
    """``{"code", "message", "hint", "retryable", "context"}``: see DESIGN.md section 5.12."""

    code: str
    message: str
    hint: str
    retryable: bool
    context: dict[str, JsonValue]


class ErrorOut(Schema):
    error: ErrorBody


ERRORS: dict[int, Any] = {s: ErrorOut for s in (400, 401, 403, 404, 409, 413, 422, 429, 500, 503)}

api.add_router("/operator", operator_routes(ERRORS))


@api.get("/runs", auth=GatewayBearer(), response={200: list[dict[str, JsonValue]], **ERRORS})
def runs(request: HttpRequest) -> list[dict[str, Any]]:
    """The runs this token may act on: its run, or a per-agent token's runs of its tenant."""
    listed = []
    for run_id in token_runs(row=request.auth):
        try:
            listed.append(run_status(run_id=run_id, admitted=request.auth))
        except GatewayError:
            raise  # the token itself was refused: the whole answer is that refusal
        except RatchetError as exc:
            # One run whose spec or state cannot be read must not hide the token's other runs.
            listed.append({"run_id": run_id, "error": {"code": "run_unreadable",
                                                       "message": f"{type(exc).__name__}: {exc.message}",
                                                       "hint": exc.hint, "retryable": exc.retryable}})
    return listed


@api.get("/runs/{run_id}", auth=GatewayBearer(), response={200: dict[str, JsonValue], **ERRORS})
def status(request: HttpRequest, run_id: str) -> dict[str, Any]:
    """The run's phase, stop reason, generation, dashboard link and the tools the token may call."""
    return run_status(run_id=run_id, admitted=request.auth)


@api.post("/runs/{run_id}/calls", auth=GatewayBearer(counted=False), response={200: CallResult, **ERRORS})
def calls(request: HttpRequest, run_id: str, body: CallIn) -> CallResult:
    """Submit one call through the run's write path; repeating its ``call_id`` never repeats the effect.

    The answer is ``executed`` (with the receipt), ``waiting_for_approval`` (with the dashboard
    link; repeat the call id once approved) or ``finished``."""
    return call_submit(run_id=run_id, call_id=body.call_id, tool=body.tool, arguments=body.arguments,
                       admitted=request.auth)


@api.get("/runs/{run_id}/calls/{call_id}", auth=GatewayBearer(), response={200: dict[str, JsonValue], **ERRORS})
def call(request: HttpRequest, run_id: str, call_id: str) -> dict[str, Any]:
    """One call as the committed checkpoint records it: unknown, pending or executed (with its receipt)."""
    return call_get(run_id=run_id, call_id=call_id, admitted=request.auth)


@api.get("/runs/{run_id}/receipts", auth=GatewayBearer(), response={200: list[dict[str, JsonValue]], **ERRORS})
def receipts(request: HttpRequest, run_id: str) -> list[dict[str, Any]]:
    """Every executed write of the run with its receipt and the call id that caused it."""
    return receipts_list(run_id=run_id, admitted=request.auth)


@api.get("/runs/{run_id}/approval", auth=GatewayBearer(), response={200: dict[str, JsonValue], **ERRORS})
def approval(request: HttpRequest, run_id: str) -> dict[str, Any]:
    """The approval the run waits for, if any, with the absolute link where a human approves it."""
    return approval_pending(run_id=run_id, admitted=request.auth)


@api.get("/runs/{run_id}/files", auth=GatewayBearer(), response={200: dict[str, JsonValue], **ERRORS})
def files(request: HttpRequest, run_id: str, path: str = "") -> dict[str, Any]:
    """One folder of the run's files (``path``; empty: the top), only what the policy's paths hold."""
    return workspace_list(run_id=run_id, path=path, admitted=request.auth)


@api.get("/runs/{run_id}/file", auth=GatewayBearer(), response={200: dict[str, JsonValue], **ERRORS})
def file(request: HttpRequest, run_id: str, path: str) -> dict[str, Any]:
    """One file of the run (``path``), when the policy's paths hold it; missing: ``exists: false``."""
    return workspace_read(run_id=run_id, path=path, admitted=request.auth)
