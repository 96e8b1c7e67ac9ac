"""Ratchet-backed LangChain tools for a LangGraph ``ToolNode`` or ``create_react_agent``.

``pip install 'ratchet-client[langgraph]'`` (langchain-core and langgraph); nothing of this
module is imported by ``import ratchet_client``. The tools are the run's own (its policy's write
actions and ``finish``, from ``GET /api/v1/runs/<id>``) plus ``read_file`` and
``list_directory``::

    from ratchet_client import Client
    from ratchet_client.langgraph import ratchet_tools

    tools = ratchet_tools(Client(URL, token=TOKEN), RUN_ID)
    agent = create_react_agent(model, tools, checkpointer=saver)

What they guarantee (Ratchet's DESIGN.md section 5.12, "Call ids"):

* **The call id is LangGraph's tool-call id** (``InjectedToolCallId``: the id of the tool call in
  the ``AIMessage`` the checkpointer persisted; :func:`ratchet_client.call_ids.ratchet_call_id`
  hashes one the gateway would refuse), never one the model invents. A graph resumed
  from its checkpoint after a crash repeats the same ids, so Ratchet answers a write it already
  executed with the original receipt instead of writing twice.
* **An approval pauses the graph**: a write that waits for a human's approval calls LangGraph's
  ``interrupt()`` with :func:`approval_request`'s value (the absolute ``approval_url``, the
  pending action). Resume with ``Command(resume=...)`` (any value): the tool repeats the same
  call id and the write executes once; still waiting, it interrupts again.
* **A refusal is the tool's result**, not an exception: a denied approval (its reason), a
  policy refusal, a conflict, a stopped run come back to the model as text. A transport error
  or a server failure still there after ``retry_seconds`` of repeating the same call id
  (:mod:`ratchet_client.retries`) raises, so the graph stops at its last checkpoint and
  resumes from there.

The tools are synchronous (the :class:`~ratchet_client.Client`); an async graph (``ainvoke``)
runs them in LangChain's executor, ``interrupt()`` included.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.types import interrupt
from pydantic import BaseModel, Field, create_model

from ratchet_client.call_ids import ratchet_call_id
from ratchet_client.client import Call, Client
from ratchet_client.errors import RatchetError, RunStopped, RuntimeFailure, TransportError
from ratchet_client.models import Tool
from ratchet_client.retries import retrying

CALL_ID_PREFIX = "lc-"
"""The prefix of a hashed call id (:func:`~ratchet_client.call_ids.ratchet_call_id`) for a LangChain tool-call id."""

RETRY_SECONDS = 60.0
"""How long a call Ratchet did not answer for good (``retryable``: no answer, ``run_busy``, ...) is repeated."""

_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool,
                               "array": list, "object": dict}


def approval_request(client: Client, call: Call) -> dict[str, Any]:
    """The value a waiting write gives ``interrupt()``: what a person must approve, and where.

    Returns:
        ``{"kind": "ratchet_approval", "run_id", "call_id", "tool", "arguments", "approval_url",
        "pending": {"call_id", "kind", "target", "risk"}}``; ``pending`` is the write the run
        waits for, which may be another call's (every call waits until it is settled).
    """
    pending = client.pending_approval(call.result.run_id)
    return {"kind": "ratchet_approval", "run_id": call.result.run_id, "call_id": call.result.call_id,
            "tool": call.tool, "arguments": call.arguments,
            "approval_url": pending.approval_url or call.result.approval_url,
            "pending": {"call_id": pending.call_id, "kind": pending.kind, "target": pending.target,
                        "risk": pending.risk}}


def tool_call(client: Client, run_id: str, tool: str, arguments: dict[str, Any], tool_call_id: str, *,
              retry_seconds: float = RETRY_SECONDS) -> str:
    """Submit one call under the tool call's id and answer what the model reads (JSON text).

    A write waiting for an approval interrupts the graph (:func:`approval_request`) and, once
    resumed, repeats the same call id. A ``retryable`` error (no answer, ``run_busy``,
    ``rate_limited``) is repeated with the same call id for up to ``retry_seconds``
    (:func:`ratchet_client.retries.retrying`).

    Returns:
        ``{"status": "executed"|"finished", "call_id", "receipt"|"detail", "repeated"}``, or
        ``{"error": code, "message", "hint"}`` for a refusal (a denial's reason is in ``message``).

    Raises:
        TransportError, RuntimeFailure: the server was not reached or failed (still, after
            ``retry_seconds`` when retryable); the graph stops and resumes from its checkpoint
            with the same call id.
        langgraph.errors.GraphInterrupt: the write waits for an approval (LangGraph's pause).
    """
    call_id = ratchet_call_id(tool_call_id, prefix=CALL_ID_PREFIX)

    def submit() -> Call:
        return retrying(lambda: client.call(run_id, tool, arguments, call_id=call_id), seconds=retry_seconds)

    try:
        call = submit()
        while call.waiting_for_approval:
            interrupt(approval_request(client, call))
            call = submit()
    except (TransportError, RuntimeFailure):
        raise
    except RunStopped as exc:
        denied = exc.context.get("stop_reason") == "approval_denied"
        return json.dumps({"error": "approval_denied" if denied else exc.code, "message": exc.message,
                           "hint": exc.hint})
    except RatchetError as exc:
        return json.dumps({"error": exc.code, "message": exc.message, "hint": exc.hint})
    answer: dict[str, Any] = {"status": call.result.status, "call_id": call.result.call_id,
                              "repeated": call.result.repeated}
    if call.result.receipt is not None:
        answer["receipt"] = call.result.receipt
    if call.result.detail:
        answer["detail"] = call.result.detail
    return json.dumps(answer, default=str)


def _args_model(tool: Tool) -> type[BaseModel]:
    """A pydantic model of the tool's JSON schema, plus the injected tool-call id (hidden from the model)."""
    schema = tool.input_schema or {}
    required = set(schema.get("required") or [])
    fields: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        if name in ("call_id", "tool_call_id"):
            continue
        kind = _JSON_TYPES.get(prop.get("type"), Any) if isinstance(prop, dict) else Any
        description = prop.get("description", "") if isinstance(prop, dict) else ""
        # An optional field the model left out stays out: the server applies its own default.
        fields[name] = (kind, Field(..., description=description)) if name in required else \
            (kind | None, Field(None, description=description))
    fields["tool_call_id"] = (Annotated[str, InjectedToolCallId], ...)
    return create_model(f"{tool.name.title().replace('_', '')}Args", **fields)


def _run_tool(client: Client, run_id: str, tool: Tool, retry_seconds: float) -> BaseTool:
    def run(tool_call_id: str, **arguments: Any) -> str:
        sent = {k: v for k, v in arguments.items() if v is not None}
        return tool_call(client, run_id, tool.name, sent, tool_call_id, retry_seconds=retry_seconds)

    return StructuredTool.from_function(run, name=tool.name, description=tool.description,
                                        args_schema=_args_model(tool))


def _refusal_text(read: Callable[[], str], retry_seconds: float) -> str:
    """``read()`` (repeated while retryable), or a refusal as the text the model reads; a transport
    or server failure raises."""
    try:
        return retrying(read, seconds=retry_seconds)
    except (TransportError, RuntimeFailure):
        raise
    except RatchetError as exc:
        return json.dumps({"error": exc.code, "message": exc.message})


def _read_tools(client: Client, run_id: str, retry_seconds: float) -> list[BaseTool]:
    def read_file(path: str) -> str:
        def read() -> str:
            found = client.read_file(run_id, path)
            return found.content if found.exists else json.dumps({"error": "not_found", "path": path})
        return _refusal_text(read, retry_seconds)

    def list_directory(path: str = "") -> str:
        return _refusal_text(lambda: json.dumps([e.path for e in client.list_directory(run_id, path).entries]),
                             retry_seconds)

    return [
        StructuredTool.from_function(read_file, name="read_file", description=(
            "Read one file of the run's directory (a path the run's policy covers); answers its text.")),
        StructuredTool.from_function(list_directory, name="list_directory", description=(
            "List one folder of the run's directory (\"\" for the top); answers the paths in it.")),
    ]


def ratchet_tools(client: Client, run_id: str, *, reads: bool = True,
                  retry_seconds: float = RETRY_SECONDS) -> list[BaseTool]:
    """The run's tools as LangChain tools for a ``ToolNode`` / ``create_react_agent``.

    Args:
        client: a :class:`~ratchet_client.Client` holding the run's gateway token.
        run_id: the run the agent drives.
        reads: also offer ``read_file`` and ``list_directory`` (the policy's paths only).
        retry_seconds: how long a call or read without a final answer (``retryable``) is
            repeated before the tool raises (0: at once, so the graph stops at its checkpoint).

    Returns:
        One tool per action the token may call (``write_file``, ``delete_file``, ``finish``, ...),
        each sending LangGraph's tool-call id as the call id (:func:`tool_call`), then the reads.

    Raises:
        RatchetError: the run could not be read (token refused, run unknown, server down).
    """
    offered = [t for t in client.run(run_id).tools if t.name not in ("read_file", "list_directory")]
    tools = [_run_tool(client, run_id, tool, retry_seconds) for tool in offered]
    return tools + (_read_tools(client, run_id, retry_seconds) if reads else [])
