"""The gateway's MCP server (official ``mcp`` SDK, low-level ``Server``; DESIGN.md section 5.12).

``tools/list`` gives the tools of the run the caller's token is for (the adapter's actions the
policy and the token allow, plus ``finish``), each schema extended by a required ``call_id``;
``tools/call`` strips the ``call_id`` and hands the call to
:func:`runtime.gateway.calls.call_submit` -- the same service as the JSON API -- in a worker
thread. A refusal comes back as a tool result with ``isError`` and the structured error
``{"error": {"code", "message", "hint", "retryable", "context"}}``, never the token. The token
is the HTTP request's ``Authorization: Bearer`` header, or, over stdio, ``RATCHET_GATEWAY_TOKEN``.
A per-agent token (several runs) names its run in the ``X-Ratchet-Run`` header (over stdio,
``RATCHET_GATEWAY_RUN``); a per-run token needs none.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from django.db import close_old_connections
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams, TextContent, Tool

from runtime.errors import GatewayError, GatewayScopeError, GatewayTokenError, RatchetError
from runtime.gateway.calls import call_submit
from runtime.gateway.reads import run_status
from runtime.gateway.tokens import token_authorise

CALL_ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$",
                  "description": "your own id for this call; repeating it never repeats the effect"}

GATEWAY_REFUSED = -32001
"""JSON-RPC error code (implementation-defined range) of a ``tools/list`` the gateway refused."""


def error_json(exc: RatchetError) -> dict[str, Any]:
    """``{"error": {...}}`` for a refusal, as the JSON API shapes it (ids only, never a token)."""
    if isinstance(exc, GatewayError):
        code, context = exc.code, exc.context
    else:
        code = "runtime_error"
        context = {k: v for k, v in exc.context.items() if k in ("run_id", "generation", "call_id")}
    return {"error": {"code": code, "message": exc.message, "hint": exc.hint, "retryable": exc.retryable,
                      "context": context}}


def _token(ctx: Any, fallback: str | None) -> str | None:
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    value = headers.get("authorization") if headers is not None else None
    if value:
        scheme, _, token = value.partition(" ")
        return token.strip() if scheme.lower() == "bearer" else None
    return fallback


def _run_header(ctx: Any, fallback: str | None) -> str | None:
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    value = headers.get("x-ratchet-run") if headers is not None else None
    return str(value).strip()[:64] if value else fallback


def _run_of(row: Any, named: str | None) -> str:
    if row.run_id is not None:
        return str(row.run_id)
    if not named:
        raise GatewayScopeError("a per-agent token needs the run in the X-Ratchet-Run header",
                                token_id=row.token_id)
    return named


def _in_thread(fn: Any) -> Any:
    def run() -> Any:
        close_old_connections()
        try:
            return fn()
        finally:
            close_old_connections()
    return anyio.to_thread.run_sync(run)


def _tool_schema(schema: dict[str, Any]) -> dict[str, Any]:
    out = dict(schema)
    out["type"] = "object"
    out["properties"] = {"call_id": CALL_ID_SCHEMA, **dict(schema.get("properties") or {})}
    out["required"] = ["call_id", *[r for r in schema.get("required") or [] if r != "call_id"]]
    return out


def gateway_server(*, stdio_token: str | None = None, stdio_run: str | None = None) -> Server:
    """The MCP server; ``stdio_token`` authorises calls that carry no HTTP header (stdio).

    Raises nothing itself: every refusal is a tool result with ``isError`` (``tools/call``) or
    an MCP error (``tools/list`` without a valid token).
    """

    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        token = _token(ctx, stdio_token)
        named = _run_header(ctx, stdio_run)

        def status() -> dict[str, Any]:
            row = token_authorise(token=token)
            return run_status(run_id=_run_of(row, named), token=token)

        try:
            found = await _in_thread(status)
        except GatewayError as exc:
            # A refusal (token, scope, rate limit) is an MCP error with the gateway's own code in
            # its data, not an internal server error.
            raise MCPError(code=GATEWAY_REFUSED, message=f"{exc.code}: {exc.message}",
                           data={"code": exc.code, "hint": exc.hint, "retryable": exc.retryable}) from None
        return ListToolsResult(tools=[Tool(name=t["name"], description=t["description"],
                                           input_schema=_tool_schema(t["input_schema"])) for t in found["tools"]])

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        token = _token(ctx, stdio_token)
        arguments = dict(params.arguments or {})
        call_id = arguments.pop("call_id", None)
        named = _run_header(ctx, stdio_run)

        def submit() -> dict[str, Any]:
            row = token_authorise(token=token)
            return call_submit(run_id=_run_of(row, named), call_id=call_id, tool=params.name, arguments=arguments,
                               token=token).as_json()

        try:
            body, failed = await _in_thread(submit), False
        except RatchetError as exc:
            body, failed = error_json(exc), True
        return CallToolResult(content=[TextContent(text=json.dumps(body, sort_keys=True))],
                              structured_content=body, is_error=failed)

    return Server("ratchet-gateway", version="1", instructions=(
        "Each tool is one write of a Ratchet run, executed exactly once per call_id. A result with "
        "status waiting_for_approval names the dashboard page where a human approves; repeat the "
        "same call_id afterwards. Call finish when the task is done."),
        on_list_tools=list_tools, on_call_tool=call_tool)


def missing_token_error() -> GatewayTokenError:
    """The error for a stdio server started without ``RATCHET_GATEWAY_TOKEN``."""
    return GatewayTokenError("no gateway token: set RATCHET_GATEWAY_TOKEN for --stdio")
