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
  the ``AIMessage`` the checkpointer persisted), never one the model invents. A graph resumed
  from its checkpoint after a crash repeats the same ids, so Ratchet answers a write it already
  executed with the original receipt instead of writing twice.
* **An approval pauses the graph**: a write that waits for a human's approval calls LangGraph's
  ``interrupt()`` with :func:`approval_request`'s value (the absolute ``approval_url``, the
  pending action). Resume with ``Command(resume=...)`` (any value): the tool repeats the same
  call id and the write executes once; still waiting, it interrupts again.
* **A refusal is the tool's result**, not an exception: a denied approval (its reason), a
  policy refusal, a conflict, a stopped run come back to the model as text. A transport error
  or a server failure raises, so the graph stops at its last checkpoint and resumes from there.

The tools are synchronous (the :class:`~ratchet_client.Client`); an async graph (``ainvoke``)
runs them in LangChain's executor, ``interrupt()`` included.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from typing import Annotated, Any

from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.types import interrupt
from pydantic import BaseModel, Field, create_model

from ratchet_client.client import Call, Client
from ratchet_client.errors import RatchetError, RunBusy, RunStopped, RuntimeFailure, TransportError
from ratchet_client.models import Tool

CALL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
"""The ids Ratchet takes as they are (the gateway's own rule)."""

BUSY_SECONDS = 60.0
"""How long a call refused ``run_busy`` (a dead process's lease not yet expired) is repeated."""

_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool,
                               "array": list, "object": dict}


def ratchet_call_id(tool_call_id: str) -> str:
    """The Ratchet call id of a framework's tool-call id: the id itself when Ratchet takes it as
    it is (``call_...``, ``toolu_...``), else ``lc-`` and 40 hex digits of its SHA-256 (the same
    id always maps to the same call id, so a resumed graph still repeats its calls).

    Args:
        tool_call_id: the tool call's id as the framework persisted it (non-empty).

    Raises:
        ValueError: ``tool_call_id`` is empty (the tool was not invoked with a full ``ToolCall``).
    """
    if not tool_call_id:
        raise ValueError("a Ratchet tool needs the tool call's id: invoke it with a ToolCall (a ToolNode does)")
    if CALL_ID.match(tool_call_id):
        return tool_call_id
    return "lc-" + hashlib.sha256(tool_call_id.encode()).hexdigest()[:40]


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


def tool_call(client: Client, run_id: str, tool: str, arguments: dict[str, Any], tool_call_id: str) -> str:
    """Submit one call under the tool call's id and answer what the model reads (JSON text).

    A write waiting for an approval interrupts the graph (:func:`approval_request`) and, once
    resumed, repeats the same call id. ``run_busy`` is repeated for up to :data:`BUSY_SECONDS`.

    Returns:
        ``{"status": "executed"|"finished", "call_id", "receipt"|"detail", "repeated"}``, or
        ``{"error": code, "message", "hint"}`` for a refusal (a denial's reason is in ``message``).

    Raises:
        TransportError, RuntimeFailure: the server was not reached or failed; the graph stops
            and resumes from its checkpoint with the same call id.
        langgraph.errors.GraphInterrupt: the write waits for an approval (LangGraph's pause).
    """
    call_id = ratchet_call_id(tool_call_id)
    try:
        call = _submit(client, run_id, tool, arguments, call_id)
        while call.waiting_for_approval:
            interrupt(approval_request(client, call))
            call = _submit(client, run_id, tool, arguments, call_id)
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


def _submit(client: Client, run_id: str, tool: str, arguments: dict[str, Any], call_id: str) -> Call:
    deadline = time.monotonic() + BUSY_SECONDS
    while True:
        try:
            return client.call(run_id, tool, arguments, call_id=call_id)
        except RunBusy:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


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


def _run_tool(client: Client, run_id: str, tool: Tool) -> BaseTool:
    def run(tool_call_id: str, **arguments: Any) -> str:
        sent = {k: v for k, v in arguments.items() if v is not None}
        return tool_call(client, run_id, tool.name, sent, tool_call_id)

    return StructuredTool.from_function(run, name=tool.name, description=tool.description,
                                        args_schema=_args_model(tool))


def _refusal_text(read: Callable[[], str]) -> str:
    """``read()``, or a refusal as the text the model reads; a transport or server failure raises."""
    try:
        return read()
    except (TransportError, RuntimeFailure):
        raise
    except RatchetError as exc:
        return json.dumps({"error": exc.code, "message": exc.message})


def _read_tools(client: Client, run_id: str) -> list[BaseTool]:
    def read_file(path: str) -> str:
        def read() -> str:
            found = client.read_file(run_id, path)
            return found.content if found.exists else json.dumps({"error": "not_found", "path": path})
        return _refusal_text(read)

    def list_directory(path: str = "") -> str:
        return _refusal_text(lambda: json.dumps([e.path for e in client.list_directory(run_id, path).entries]))

    return [
        StructuredTool.from_function(read_file, name="read_file", description=(
            "Read one file of the run's directory (a path the run's policy covers); answers its text.")),
        StructuredTool.from_function(list_directory, name="list_directory", description=(
            "List one folder of the run's directory (\"\" for the top); answers the paths in it.")),
    ]


def ratchet_tools(client: Client, run_id: str, *, reads: bool = True) -> list[BaseTool]:
    """The run's tools as LangChain tools for a ``ToolNode`` / ``create_react_agent``.

    Args:
        client: a :class:`~ratchet_client.Client` holding the run's gateway token.
        run_id: the run the agent drives.
        reads: also offer ``read_file`` and ``list_directory`` (the policy's paths only).

    Returns:
        One tool per action the token may call (``write_file``, ``delete_file``, ``finish``, ...),
        each sending LangGraph's tool-call id as the call id (:func:`tool_call`), then the reads.

    Raises:
        RatchetError: the run could not be read (token refused, run unknown, server down).
    """
    offered = [t for t in client.run(run_id).tools if t.name not in ("read_file", "list_directory")]
    tools = [_run_tool(client, run_id, tool) for tool in offered]
    return tools + (_read_tools(client, run_id) if reads else [])
