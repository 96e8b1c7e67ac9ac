"""The gateway's MCP server (official ``mcp`` SDK, low-level ``Server``; DESIGN.md section 5.12).

``tools/list`` gives the tools of the run the caller's token is for (the adapter's actions the
policy and the token allow, plus ``finish``), each schema extended by an optional ``call_id``
(left out, the gateway derives one from the call), and the read tools, resources and prompt of
:mod:`runtime.gateway.mcp_reads` (DESIGN.md section 5.13); descriptions are plain text.
``tools/call`` strips the ``call_id`` and hands the call to
:func:`runtime.gateway.calls.call_submit` -- the same service as the JSON API -- in a worker
thread. A refusal comes back as a tool result with ``isError`` and the structured error
``{"error": {"code", "message", "hint", "retryable", "context"}}``, never the token. The token
is the HTTP request's ``Authorization: Bearer`` header, or, over stdio, ``RATCHET_GATEWAY_TOKEN``;
it is read, checked and counted once per request. A per-agent token (several runs) names its run
in the ``X-Ratchet-Run`` header (over stdio, ``RATCHET_GATEWAY_RUN``); a per-run token needs none.

**Waiting for an approval.** A call that needs an approval answers ``waiting_for_approval`` with
the dashboard link. When the client declares the elicitation capability, the server first asks
it instead: "approval is required; accept to wait up to N seconds, decline to get the answer
now" (on the 2026-07-28 protocol as an ``input_required`` result the client answers by repeating
the call; on older ones as an ``elicitation/create`` request where the transport has a back
channel). Accepted, the server waits -- only reading the run row, bounded by
``RATCHET_GATEWAY_APPROVAL_WAIT_SECONDS`` -- and, once a human granted the approval in the
dashboard, repeats the same call id once and returns its receipt. The elicitation never approves
anything: approvals are signed by the approval service alone (DESIGN.md sections 2.1, 6.2).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from django.db import close_old_connections
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    ClientCapabilities,
    ElicitationCapability,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    GetPromptRequestParams,
    GetPromptResult,
    InputRequiredResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    Prompt,
    PromptMessage,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from runtime.core.tracing import span
from runtime.errors import GatewayError, GatewayScopeError, GatewayTokenMissingError, RatchetError
from runtime.gateway.approval_wait import (
    approval_generation,
    approval_poll_seconds,
    approval_settled,
    approval_wait_seconds,
)
from runtime.gateway.calls import CallResult, call_submit
from runtime.gateway.mcp_reads import (
    PROMPT_NAME,
    PROMPT_TEXT,
    READ_TOOLS,
    files_template,
    read_tool_call,
    read_tool_names,
    resource_read,
    run_resources,
)
from runtime.gateway.reads import run_status
from runtime.gateway.tokens import token_admit, token_request_admit, token_request_check
from runtime.gateway.tools import run_spec, run_tools

CALL_ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$",
                  "description": ("optional: your own id for this call; repeating it never repeats the effect. "
                                  "Left out, the gateway derives one from the call, so an identical repeated call "
                                  "returns the first result")}

GATEWAY_REFUSED = -32001
"""JSON-RPC error code (implementation-defined range) of a ``tools/list`` the gateway refused."""

APPROVAL_INPUT = "ratchet_approval_wait"
"""The key of the gateway's elicitation in an ``input_required`` result and the client's answer."""


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
    out["required"] = [r for r in schema.get("required") or [] if r != "call_id"]
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
            row = token_request_admit(token=token)
            return run_status(run_id=_run_of(row, named), admitted=row)

        try:
            found = await _in_thread(status)
        except GatewayError as exc:
            # A refusal (token, scope, rate limit) is an MCP error with the gateway's own code in
            # its data, not an internal server error.
            raise MCPError(code=GATEWAY_REFUSED, message=f"{exc.code}: {exc.message}",
                           data={"code": exc.code, "hint": exc.hint, "retryable": exc.retryable}) from None
        tools = [Tool(name=t["name"], description=t["description"], input_schema=_tool_schema(t["input_schema"]))
                 for t in found["tools"]]
        tools += [Tool(name=name, description=READ_TOOLS[name][0], input_schema=READ_TOOLS[name][1],
                       annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
                  for name in read_tool_names(offered={t["name"] for t in found["tools"]})]
        return ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult | InputRequiredResult:
        token = _token(ctx, stdio_token)
        arguments = dict(params.arguments or {})
        call_id = arguments.pop("call_id", None)
        named = _run_header(ctx, stdio_run)

        def submit() -> CallResult:
            row = token_request_check(token=token)  # the call's first commit counts it
            return call_submit(run_id=_run_of(row, named), call_id=call_id, tool=params.name, arguments=arguments,
                               admitted=row)

        def read() -> Any:
            row = token_request_admit(token=token)
            run_id = _run_of(row, named)
            _, run = token_admit(run_id=run_id, admitted=row)
            if params.name in {t.name for t in run_tools(spec=run_spec(stored=run.spec["task"]))}:
                return None  # the run's own write tool of that name wins
            return read_tool_call(name=params.name, arguments=arguments, run_id=run_id, row=row)

        with span("ratchet.mcp.tools_call", attributes={"ratchet.gateway.tool": str(params.name)[:200]}):
            return await _call_tool(ctx, params, submit, read)

    async def _call_tool(ctx: Any, params: CallToolRequestParams, submit: Any, read: Any
                         ) -> CallToolResult | InputRequiredResult:
        try:
            if params.name in READ_TOOLS:  # a read records nothing: a call_id sent with it is ignored
                answer_read = await _in_thread(read)
                if answer_read is not None:
                    body = answer_read if isinstance(answer_read, dict) else {"result": answer_read}
                    return _tool_result(body, failed=False)
            result = await _in_thread(submit)
            if result.status == "waiting_for_approval":
                answer = (params.input_responses or {}).get(APPROVAL_INPUT)
                if answer is None and _elicits(ctx):
                    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                        return InputRequiredResult(input_requests={APPROVAL_INPUT: ElicitRequest(
                            params=_approval_question(result))})
                    answer = await _ask_back(ctx, result)
                if isinstance(answer, ElicitResult) and answer.action == "accept":
                    result = await _wait_then_repeat(result, submit)
        except RatchetError as exc:
            return _tool_result(error_json(exc), failed=True)
        return _tool_result(result.as_json(), failed=False)

    def run_of_request(ctx: Any) -> tuple[Any, str]:
        row = token_request_admit(token=_token(ctx, stdio_token))
        run_id = _run_of(row, _run_header(ctx, stdio_run))
        token_admit(run_id=run_id, admitted=row)  # the scope, checked before anything is named
        return row, run_id

    async def refused(fn: Any) -> Any:
        try:
            return await _in_thread(fn)
        except GatewayError as exc:
            raise MCPError(code=GATEWAY_REFUSED, message=f"{exc.code}: {exc.message}",
                           data={"code": exc.code, "hint": exc.hint, "retryable": exc.retryable}) from None

    async def list_resources(ctx: Any, params: PaginatedRequestParams | None) -> ListResourcesResult:
        _, run_id = await refused(lambda: run_of_request(ctx))
        return ListResourcesResult(resources=[
            Resource(uri=r["uri"], name=r["name"], description=r["description"],
                     mime_type="application/json") for r in run_resources(run_id=run_id)])

    async def list_templates(ctx: Any, params: PaginatedRequestParams | None) -> ListResourceTemplatesResult:
        _, run_id = await refused(lambda: run_of_request(ctx))
        return ListResourceTemplatesResult(resource_templates=[ResourceTemplate(
            name="file", uri_template=files_template(run_id=run_id), mime_type="text/plain",
            description=READ_TOOLS["read_file"][0])])

    async def read_resource(ctx: Any, params: ReadResourceRequestParams) -> ReadResourceResult:
        def read() -> tuple[str, str]:
            row, run_id = run_of_request(ctx)
            return resource_read(uri=str(params.uri), run_id=run_id, row=row)
        mime, text = await refused(read)
        return ReadResourceResult(contents=[TextResourceContents(uri=str(params.uri), mime_type=mime, text=text)])

    async def list_prompts(ctx: Any, params: PaginatedRequestParams | None) -> ListPromptsResult:
        return ListPromptsResult(prompts=[Prompt(name=PROMPT_NAME, description="How to work in a Ratchet run")])

    async def get_prompt(ctx: Any, params: GetPromptRequestParams) -> GetPromptResult:
        if params.name != PROMPT_NAME:
            raise MCPError(code=-32602, message=f"no prompt named {params.name[:80]!r}; see prompts/list")
        return GetPromptResult(description="How to work in a Ratchet run",
                               messages=[PromptMessage(role="user", content=TextContent(text=PROMPT_TEXT))])

    return Server("ratchet-gateway", version="1", instructions=PROMPT_TEXT,
                  on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_templates, on_read_resource=read_resource,
                  on_list_prompts=list_prompts, on_get_prompt=get_prompt)


def missing_token_error() -> GatewayTokenMissingError:
    """The error for a stdio server started without ``RATCHET_GATEWAY_TOKEN``."""
    return GatewayTokenMissingError("no token: set RATCHET_GATEWAY_TOKEN for --stdio")


def _tool_result(body: dict[str, Any], *, failed: bool) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=json.dumps(body, sort_keys=True))],
                          structured_content=body, is_error=failed)


def _elicits(ctx: Any) -> bool:
    """Whether the client declared the elicitation capability (per request on 2026-07-28)."""
    session = getattr(ctx, "session", None)
    check = getattr(session, "check_client_capability", None)
    return bool(check and check(ClientCapabilities(elicitation=ElicitationCapability())))


def _approval_question(result: CallResult) -> ElicitRequestFormParams:
    """The question put to the client: wait for the approval, or take the answer now."""
    seconds = int(approval_wait_seconds())
    return ElicitRequestFormParams(
        message=(f"Approval is required: a human must approve call {result.call_id} of run {result.run_id} in the "
                 f"dashboard ({result.approval_url}). Accept to wait up to {seconds} seconds for that approval and "
                 "get the receipt; decline to get the waiting_for_approval result now. Accepting approves nothing."),
        requested_schema={"type": "object", "properties": {}})


async def _ask_back(ctx: Any, result: CallResult) -> ElicitResult | None:
    """Ask over the back channel (protocols before 2026-07-28); None when there is none."""
    question = _approval_question(result)
    try:
        return await ctx.session.elicit_form(question.message, question.requested_schema,
                                             related_request_id=getattr(ctx, "request_id", None))
    except NoBackChannelError:
        return None  # a stateless transport cannot ask: the client gets today's answer


async def _wait_then_repeat(result: CallResult, submit: Any) -> CallResult:
    """Poll the run row until the approval is settled or the wait ends; then repeat the same call
    id once (granted: it executes once). Still waiting: the waiting result, saying so.

    Raises:
        RatchetError: from the repeated call (the token revoked meanwhile, the run stopped, ...).
    """
    seconds, poll = approval_wait_seconds(), approval_poll_seconds()
    generation = await _in_thread(lambda: approval_generation(run_id=result.run_id))
    with anyio.move_on_after(seconds):
        while not await _in_thread(lambda: approval_settled(run_id=result.run_id, generation=generation)):
            await anyio.sleep(poll)
    repeated: CallResult = await _in_thread(submit)
    if repeated.status == "waiting_for_approval":
        return repeated.model_copy(update={"detail": (
            f"no approval within {int(seconds)} seconds; a human must approve this write in the dashboard, "
            "then repeat the same call id and it executes once")})
    return repeated
