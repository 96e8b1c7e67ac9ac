"""Ratchet-backed tools for the OpenAI Agents SDK (``pip install 'ratchet-client[openai-agents]'``).

:class:`RatchetTools` turns a run's tools (``GET /api/v1/runs/<id>``) into the SDK's
``FunctionTool`` objects, and adds ``read_file`` and ``list_directory`` for the run's directory.
Every write goes through Ratchet's gateway with **the SDK's own tool-call id as Ratchet's call
id** (``ToolContext.tool_call_id``; one the gateway would refuse is hashed by
:func:`ratchet_client.call_ids.ratchet_call_id`), so the model never invents an id and a resumed
``RunState`` repeats the same ids: Ratchet answers a repeated id from its ledger, never with a
second effect (Ratchet's DESIGN.md sections 5.12 and 5.17).

**Approvals.** Only Ratchet knows whether a write needs a human (its policy's risks): the
write tools' ``needs_approval`` submits the call and answers True when Ratchet says
``waiting_for_approval``. The SDK then stops the run with ``result.interruptions``, as for any
tool that needs approval. :meth:`RatchetTools.settle` waits for the human's decision in
Ratchet's dashboard, repeats the call once and records the answer on the SDK's ``RunState``
(``approve`` when it executed; ``reject`` with Ratchet's reason as the tool result when the human
denied it, whether the run stopped or goes on); ``Runner.run(agent, state)`` resumes. The
state can be serialized (``state.to_string()``) while the human decides and resumed by another
process (``RunState.from_string``); :meth:`RatchetTools.run` does all of it::

    result = await Runner.run(agent, "Write the notes")
    while result.interruptions:
        state = await ratchet.settle(result)
        if any(item.tool_name not in ratchet.write_tools for item in state.get_interruptions()):
            break  # another tool's approval: settle leaves it to the caller, who decides, then resumes
        result = await Runner.run(agent, state)

A write that needs no approval executes already when the SDK asks; the invocation then answers
with that receipt. A call that meets no final answer (``retryable``: the web process restarting,
the run's lease held by a process that died, a rate limit) is repeated with the same call id for
up to ``retry_seconds`` (:mod:`ratchet_client.retries`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from agents import Agent, FunctionTool, RunContextWrapper, Runner, RunResult, RunState
from agents.items import ToolApprovalItem
from agents.tool_context import ToolContext

from ratchet_client.async_client import AsyncCall, AsyncClient
from ratchet_client.call_ids import ratchet_call_id
from ratchet_client.client import Client
from ratchet_client.errors import ApprovalWaitTimeout, RatchetError, RunStopped
from ratchet_client.models import Tool
from ratchet_client.retries import retrying_async

T = TypeVar("T")

CALL_ID_PREFIX = "oa-"
"""The prefix of a hashed call id (:func:`~ratchet_client.call_ids.ratchet_call_id`): an SDK
tool-call id the gateway refuses as it is (over 64 characters, or outside ``[A-Za-z0-9_.:-]``)."""

DENIED = "Ratchet did not execute this call: "
"""How the tool result of a write a human's decision kept from running begins (denied, or the
run stopped), followed by Ratchet's reason."""

READS: dict[str, tuple[str, dict[str, Any]]] = {
    "read_file": ("Read one file of the run's directory (only paths the run's policy covers).",
                  {"type": "object", "properties": {"path": {"type": "string", "description": "relative path"}},
                   "required": ["path"], "additionalProperties": False}),
    "list_directory": ("List one folder of the run's directory (only what the run's policy covers).",
                       {"type": "object", "properties": {"path": {"type": "string",
                                                                  "description": "relative folder; empty: the top"}},
                        "required": ["path"], "additionalProperties": False}),
}


class RatchetTools:
    """The tools of one Ratchet run for an OpenAI Agents SDK agent.

    Args:
        base_url: where Ratchet's web process answers, e.g. ``"http://127.0.0.1:8000"``.
        token: the agent's gateway token for the run (``rgw_...``).
        run_id: the run the calls belong to.
        approval_timeout: seconds :meth:`settle` waits for a human at most (None: no limit).
        poll_seconds: seconds between two reads while waiting for a human.
        retry_seconds: how long a call without an answer is repeated (same call id) before its
            error is given to the model.
        timeout: seconds per HTTP request.
    """

    def __init__(self, base_url: str, *, token: str, run_id: str, approval_timeout: float | None = None,
                 poll_seconds: float = 2.0, retry_seconds: float = 120.0, timeout: float = 60.0) -> None:
        self.base_url, self.run_id = base_url.rstrip("/"), run_id
        self._token, self._timeout = token, timeout
        self.approval_timeout, self.poll_seconds, self.retry_seconds = approval_timeout, poll_seconds, retry_seconds
        self._answered: dict[str, AsyncCall | RatchetError] = {}
        """What Ratchet answered while the SDK asked whether a call needs approval, or while
        :meth:`settle` repeated a settled one (the call, or its final refusal), by the SDK's
        tool-call id: the invocation answers with it instead of submitting again."""
        self.write_tools: set[str] = set()

    def _client(self) -> AsyncClient:
        return AsyncClient(self.base_url, token=self._token, timeout=self._timeout)

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        return await retrying_async(attempt, seconds=self.retry_seconds, pause=min(1.0, self.poll_seconds))

    def tools(self, *, reads: bool = True) -> list[FunctionTool]:
        """The run's tools as ``FunctionTool`` objects (one request to Ratchet, now).

        Args:
            reads: also offer ``read_file`` and ``list_directory``.

        Raises:
            RatchetError: the token is refused or Ratchet cannot be reached.
        """
        with Client(self.base_url, token=self._token, timeout=self._timeout) as client:
            offered = client.run(self.run_id).tools
        self.write_tools = {tool.name for tool in offered}
        out = [self._write_tool(tool) for tool in offered]
        if reads:
            out += [self._read_tool(name) for name in READS if name not in self.write_tools]
        return out

    def _write_tool(self, tool: Tool) -> FunctionTool:
        name = tool.name

        async def needs_approval(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
            try:
                call = await self._submit(name, params, call_id)
            except RatchetError as exc:
                # Already repeated while retryable: the invocation gives the model this refusal.
                self._answered[call_id] = exc
                return False
            if call.waiting_for_approval:
                return True
            self._answered[call_id] = call
            return False

        async def invoke(ctx: ToolContext[Any], raw: str) -> str:
            try:
                arguments = json.loads(raw or "{}")
            except ValueError:
                return _error_text("invalid_input", "the arguments are not JSON")
            try:
                answered = self._answered.pop(ctx.tool_call_id, None)
                if isinstance(answered, RatchetError):
                    raise answered
                call = answered or await self._submit(name, arguments, ctx.tool_call_id)
                if call.waiting_for_approval:
                    # Another call's approval came first while the SDK thought none was needed.
                    call = await call.wait_for_approval(timeout=self.approval_timeout,
                                                        poll_seconds=self.poll_seconds)
            except RatchetError as exc:
                return _error_text(exc.code, exc.message, hint=exc.hint, retryable=exc.retryable)
            if call.denied:  # a continue-denial met on a resumed state: as settle() rejects it
                return DENIED + str(call.detail or "denied")
            return json.dumps(_call_output(call), sort_keys=True)

        return FunctionTool(name=name, description=tool.description, params_json_schema=dict(tool.input_schema),
                            on_invoke_tool=invoke, strict_json_schema=False,
                            needs_approval=needs_approval if name != "finish" else False)

    async def _submit(self, tool: str, arguments: dict[str, Any], tool_call_id: str) -> AsyncCall:
        """One call under the SDK's tool-call id (as Ratchet takes it), repeated while retryable."""
        call_id = ratchet_call_id(tool_call_id, prefix=CALL_ID_PREFIX)

        async def attempt() -> AsyncCall:
            async with self._client() as client:
                return await client.call(self.run_id, tool, arguments, call_id=call_id)

        return await self._retrying(attempt)

    def _read_tool(self, name: str) -> FunctionTool:
        description, schema = READS[name]

        async def invoke(ctx: ToolContext[Any], raw: str) -> str:
            try:
                path = str(json.loads(raw or "{}").get("path") or "")
            except (ValueError, AttributeError):
                return _error_text("invalid_input", "the arguments are not a JSON object")

            async def attempt() -> str:
                async with self._client() as client:
                    if name == "read_file":
                        found = await client.read_file(self.run_id, path)
                        return found.content if found.exists and found.content is not None else \
                            f"(no file {found.path})"
                    listing = await client.list_directory(self.run_id, path)
                    return json.dumps([{"path": e.path, "kind": e.kind} for e in listing.entries])

            try:
                return await self._retrying(attempt)
            except RatchetError as exc:
                return _error_text(exc.code, exc.message, hint=exc.hint)

        return FunctionTool(name=name, description=description, params_json_schema=schema, on_invoke_tool=invoke,
                            strict_json_schema=True)

    async def run(self, agent: Agent[Any], input: str | list[Any] | RunState[Any, Any], *,
                  state_file: str | Path | None = None,
                  on_pause: Callable[[list[ToolApprovalItem]], Any] | None = None, **runner: Any) -> RunResult:
        """``Runner.run`` until the agent is done, pausing for Ratchet's approvals as the SDK does.

        Each time Ratchet holds a write for a human, the SDK's ``RunState`` is written to
        ``state_file``, ``on_pause`` is told, and :meth:`settle` waits (``approval_timeout``) for
        the decision; then the run resumes. Called again with a ``state_file`` that exists (a
        restarted process), it resumes from that state instead of asking the model again from
        ``input``.

        Args:
            agent: the SDK agent (its tools from :meth:`tools`).
            input: the task, as for ``Runner.run`` (a ``RunState`` resumes it).
            state_file: where the paused ``RunState`` is kept (None: only in memory); removed
                once the agent is done.
            on_pause: called with the interruptions each time the run pauses, after the state
                was saved (e.g. to show the approval link); its result is ignored.
            runner: further keyword arguments of ``Runner.run`` (``max_turns``, ``context``, ...).

        Returns:
            The final ``RunResult``; or the interrupted one (``result.interruptions`` not empty,
            its state in ``state_file`` with Ratchet's decisions recorded) when nobody decided
            within ``approval_timeout``, or when an interruption is not a Ratchet write (another
            tool's approval: the caller decides it, then resumes).

        Raises:
            RatchetError: Ratchet could not be reached or refused the token while settling; the
                SDK's own errors as ``Runner.run``.
        """
        saved = Path(state_file) if state_file is not None else None
        start: Any = input
        if saved is not None and saved.exists():
            start = await RunState.from_string(agent, saved.read_text(encoding="utf-8"))
        result = await Runner.run(agent, start, **runner)
        while result.interruptions:
            state = result.to_state()
            if saved is not None:
                saved.write_text(state.to_string(), encoding="utf-8")
            if on_pause is not None:
                on_pause(list(result.interruptions))
            try:
                state = await self.settle(state)
            except ApprovalWaitTimeout:
                return result
            if any(not self._settles(item) for item in state.get_interruptions()):
                # Not Ratchet's to decide: running again would meet the same undecided item.
                if saved is not None:
                    saved.write_text(state.to_string(), encoding="utf-8")
                return result
            result = await Runner.run(agent, state, **runner)
        if saved is not None:
            saved.unlink(missing_ok=True)
        return result

    def _settles(self, item: ToolApprovalItem) -> bool:
        """Whether :meth:`settle` decides ``item``: an interrupted Ratchet write with a call id."""
        return item.tool_name in self.write_tools and bool(item.call_id)

    async def settle(self, source: RunResult | RunState[Any, Any]) -> RunState[Any, Any]:
        """Wait for Ratchet's human decisions on the interrupted Ratchet calls; record them on the state.

        Args:
            source: the interrupted result (``result.interruptions`` not empty), or a ``RunState``
                (e.g. read back with ``RunState.from_string`` after a restart).

        Returns:
            The ``RunState`` to resume with ``Runner.run(agent, state)``. Once the human decided,
            each interrupted Ratchet write is repeated once with its call id (waiting with
            :meth:`AsyncCall.wait_for_approval`): ``executed`` (granted; it ran once, now) is
            approved and the invocation answers with that receipt; ``denied`` (the human let
            the run go on) and a stopped run (denied with ``mode="stop"``, or expired) are
            rejected with Ratchet's reason as the tool result. Interruptions of other tools are
            left for the caller.

        Raises:
            ApprovalWaitTimeout: nobody decided within ``approval_timeout`` (nothing recorded;
                keep the state and call again).
            RatchetError: Ratchet could not be reached (after ``retry_seconds``), refused the
                token, or refused the repeated call otherwise (nothing recorded for that item).
        """
        state = source.to_state() if isinstance(source, RunResult) else source
        for item in state.get_interruptions():
            if self._settles(item):
                await self._decide(state, item)
        return state

    async def _decide(self, state: RunState[Any, Any], item: ToolApprovalItem) -> None:
        tool_call_id = str(item.call_id)
        try:
            arguments = json.loads(item.arguments or "{}")
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            state.reject(item, rejection_message=DENIED + "its arguments are not a JSON object")
            return
        deadline = None if self.approval_timeout is None else time.monotonic() + self.approval_timeout

        async def settled(client: AsyncClient) -> AsyncCall:
            # The call as Ratchet holds it (waiting, or already settled after a restart), then
            # the wait and the one repeat; again if another call's approval came first.
            call = await client.call(self.run_id, str(item.tool_name), arguments,
                                     call_id=ratchet_call_id(tool_call_id, prefix=CALL_ID_PREFIX))
            while call.waiting_for_approval:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                call = await call.wait_for_approval(timeout=left, poll_seconds=self.poll_seconds)
            return call

        async with self._client() as client:
            try:
                call = await self._retrying(lambda: settled(client))
            except RunStopped as exc:
                state.reject(item, rejection_message=DENIED + exc.message)
                return
        if call.denied:
            state.reject(item, rejection_message=DENIED + str(call.detail or "denied"))
            return
        self._answered[tool_call_id] = call
        state.approve(item)


def _call_output(call: AsyncCall) -> dict[str, Any]:
    """What the model reads of a call: its status, call id and receipt (or why it waits)."""
    out: dict[str, Any] = {"status": call.status, "call_id": call.call_id}
    if call.receipt is not None:
        out["receipt"] = call.receipt
    for name in ("phase", "approval_url", "detail"):
        if getattr(call, name, None):
            out[name] = getattr(call, name)
    return out


def _error_text(code: str, message: str, *, hint: str = "", retryable: bool = False) -> str:
    return json.dumps({"error": {"code": code, "message": message, "hint": hint, "retryable": retryable}})
