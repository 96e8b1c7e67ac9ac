"""The asynchronous client (``httpx.AsyncClient``): the same endpoints, answers and errors as
:mod:`ratchet_client.client`, each method a coroutine."""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx

from ratchet_client import _protocol as p
from ratchet_client.errors import ApprovalWaitTimeout, WaitingForApproval
from ratchet_client.models import (
    CallRecord,
    CallResult,
    DirectoryListing,
    FileContent,
    IssuedToken,
    PendingApproval,
    ReceiptEntry,
    RunInfo,
    RunStatus,
)


class AsyncCall:
    """One call's result, as :class:`ratchet_client.Call`, with a coroutine ``wait_for_approval``."""

    def __init__(self, client: AsyncClient, result: CallResult, tool: str, arguments: dict[str, Any]) -> None:
        self.result, self._client, self.tool, self.arguments = result, client, tool, arguments

    def __getattr__(self, name: str) -> Any:
        return getattr(self.result, name)

    def __repr__(self) -> str:
        return (f"AsyncCall(status={self.result.status!r}, run_id={self.result.run_id!r}, "
                f"call_id={self.result.call_id!r})")

    @property
    def executed(self) -> bool:
        return self.result.status == "executed"

    @property
    def waiting_for_approval(self) -> bool:
        return self.result.status == "waiting_for_approval"

    @property
    def denied(self) -> bool:
        """A person refused this write and let the run go on: ``detail`` is their reason."""
        return self.result.status == "denied"

    async def wait_for_approval(self, timeout: float | None = None, *, poll_seconds: float = 2.0) -> AsyncCall:
        """As :meth:`ratchet_client.Call.wait_for_approval`, without blocking the event loop."""
        if not self.waiting_for_approval:
            return self
        deadline = None if timeout is None else time.monotonic() + timeout
        while (await self._client.pending_approval(self.result.run_id)).waiting:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise ApprovalWaitTimeout(f"no approval within {timeout} seconds", retryable=True,
                                          context={"run_id": self.result.run_id, "call_id": self.result.call_id,
                                                   "approval_url": self.result.approval_url})
            await anyio.sleep(poll_seconds if left is None else min(poll_seconds, left))
        return await self._client.call(self.result.run_id, self.tool, self.arguments,
                                       call_id=self.result.call_id or None)


class AsyncClient:
    """An asynchronous client of the gateway's JSON API; arguments as :class:`ratchet_client.Client`."""

    def __init__(self, base_url: str, *, token: str | None = None, operator_credential: str | None = None,
                 timeout: float = 30.0, http: httpx.AsyncClient | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._token, self._credential = token, operator_credential
        self._http = http or httpx.AsyncClient(timeout=timeout)
        self._owns_http = http is None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def _send(self, request: p.Request) -> Any:
        headers = p.bearer(request, self._token, self._credential)
        try:
            response = await self._http.request(request.method, self.base_url + request.path,
                                                params=request.params, json=request.body, headers=headers)
        except httpx.HTTPError as exc:
            raise p.transport_error(exc) from None
        return p.answer(response)

    async def runs(self) -> list[RunStatus]:
        return [RunStatus.from_json(r) for r in await self._send(p.agent_get("/runs")) if "phase" in r]

    async def run(self, run_id: str) -> RunStatus:
        return RunStatus.from_json(await self._send(p.agent_get(p.run_path(run_id))))

    async def call(self, run_id: str, tool: str, arguments: dict[str, Any] | None = None, *,
                   call_id: str | None = None) -> AsyncCall:
        """As :meth:`ratchet_client.Client.call`."""
        args = dict(arguments or {})
        try:
            body = await self._send(p.call_request(run_id, tool, args, call_id))
        except WaitingForApproval as exc:
            body = p.waiting_body(exc, run_id)
        return AsyncCall(self, CallResult.from_json(body), tool, args)

    async def finish(self, run_id: str, summary: str = "", *, call_id: str | None = None) -> AsyncCall:
        return await self.call(run_id, "finish", {"summary": summary}, call_id=call_id)

    async def call_record(self, run_id: str, call_id: str) -> CallRecord:
        return CallRecord.from_json(await self._send(p.agent_get(p.run_path(run_id, f"/calls/{p._seg(call_id)}"))))

    async def receipts(self, run_id: str) -> list[ReceiptEntry]:
        return [ReceiptEntry.from_json(r) for r in await self._send(p.agent_get(p.run_path(run_id, "/receipts")))]

    async def pending_approval(self, run_id: str) -> PendingApproval:
        return PendingApproval.from_json(await self._send(p.agent_get(p.run_path(run_id, "/approval"))))

    async def read_file(self, run_id: str, path: str) -> FileContent:
        return FileContent.from_json(await self._send(p.agent_get(p.run_path(run_id, "/file"), {"path": path})))

    async def list_directory(self, run_id: str, path: str = "") -> DirectoryListing:
        return DirectoryListing.from_json(await self._send(p.agent_get(p.run_path(run_id, "/files"),
                                                                       {"path": path})))

    async def start_run(self, task: str) -> RunInfo:
        return RunInfo.from_json(await self._send(p.operator_request("POST", "/runs", {"task": task})))

    async def operator_run(self, run_id: str) -> RunInfo:
        return RunInfo.from_json(await self._send(p.operator_request("GET", f"/runs/{p._seg(run_id)}")))

    async def cancel_run(self, run_id: str) -> str:
        return str((await self._send(p.operator_request("POST", f"/runs/{p._seg(run_id)}/cancel")))["phase"])

    async def issue_token(self, *, run_id: str | None = None, run_ids: list[str] | None = None, task_id: str = "",
                          agent: str = "", actions: list[str] | None = None) -> IssuedToken:
        body = await self._send(p.operator_request("POST", "/tokens", p.token_body(run_id, run_ids, task_id, agent,
                                                                                    actions)))
        return IssuedToken(token_id=body["token_id"], token=body["token"], run_id=body.get("run_id"))

    async def revoke_token(self, token_id: str) -> bool:
        return bool((await self._send(p.operator_request("DELETE", f"/tokens/{p._seg(token_id)}")))["revoked"])
