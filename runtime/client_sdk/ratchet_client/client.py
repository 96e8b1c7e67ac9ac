"""The synchronous client and the call it returns.

``Client(base_url, token=...)`` speaks the agent endpoints (a gateway token, ``rgw_...``);
``operator_credential=`` (``rop_...``) the operator ones. Every refusal raises the
:mod:`ratchet_client.errors` class of its code. :meth:`Client.call` answers a :class:`Call`:
executed with its receipt, finished, or waiting for a human's approval -- a value to wait on
with :meth:`Call.wait_for_approval`, never an exception, also when it is *another* call of the
run that waits.
"""

from __future__ import annotations

import time
from typing import Any

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


class Call:
    """One call's result (every :class:`~ratchet_client.models.CallResult` field is an attribute),
    bound to the client, tool and arguments that made it so it can be waited on and repeated."""

    def __init__(self, client: Client, result: CallResult, tool: str, arguments: dict[str, Any]) -> None:
        self.result, self._client, self.tool, self.arguments = result, client, tool, arguments

    def __getattr__(self, name: str) -> Any:
        return getattr(self.result, name)

    def __repr__(self) -> str:
        return f"Call(status={self.result.status!r}, run_id={self.result.run_id!r}, call_id={self.result.call_id!r})"

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

    def wait_for_approval(self, timeout: float | None = None, *, poll_seconds: float = 2.0) -> Call:
        """Wait until a human settles the approval, then repeat this call once (same call id).

        Only reads while waiting (``GET /runs/<id>/approval``, each read counted against the
        token's rate limit); the approval is granted in the dashboard, never here.

        Args:
            timeout: seconds to wait at most (None: no limit).
            poll_seconds: seconds between two reads.

        Returns:
            This call if it is not waiting; else the repeated call's result (executed once
            approved; ``denied`` with the approver's reason when they let the run go on;
            waiting again if another approval came first).

        Raises:
            ApprovalWaitTimeout: not settled within ``timeout`` (nothing was repeated).
            RunStopped: the approval was denied or expired and the run ended (from the repeat).
        """
        if not self.waiting_for_approval:
            return self
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._client.pending_approval(self.result.run_id).waiting:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise ApprovalWaitTimeout(f"no approval within {timeout} seconds", retryable=True,
                                          context={"run_id": self.result.run_id, "call_id": self.result.call_id,
                                                   "approval_url": self.result.approval_url})
            time.sleep(poll_seconds if left is None else min(poll_seconds, left))
        return self._client.call(self.result.run_id, self.tool, self.arguments, call_id=self.result.call_id or None)


class Client:
    """A synchronous client of the gateway's JSON API (httpx).

    Args:
        base_url: where the web process answers, e.g. ``"http://127.0.0.1:8000"``.
        token: an agent's gateway token (agent endpoints).
        operator_credential: an operator credential (operator endpoints).
        timeout: seconds per request.
        http: an ``httpx.Client`` to use instead of a new one (its base URL is ignored).
    """

    def __init__(self, base_url: str, *, token: str | None = None, operator_credential: str | None = None,
                 timeout: float = 30.0, http: httpx.Client | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._token, self._credential = token, operator_credential
        self._http = http or httpx.Client(timeout=timeout)
        self._owns_http = http is None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def _send(self, request: p.Request) -> Any:
        headers = p.bearer(request, self._token, self._credential)
        try:
            response = self._http.request(request.method, self.base_url + request.path, params=request.params,
                                          json=request.body, headers=headers)
        except httpx.HTTPError as exc:
            raise p.transport_error(exc) from None
        return p.answer(response)

    # The agent endpoints (a gateway token).
    def runs(self) -> list[RunStatus]:
        """The runs the token may act on."""
        return [RunStatus.from_json(r) for r in self._send(p.agent_get("/runs")) if "phase" in r]

    def run(self, run_id: str) -> RunStatus:
        """The run's phase, generation, dashboard link and the tools the token may call."""
        return RunStatus.from_json(self._send(p.agent_get(p.run_path(run_id))))

    def call(self, run_id: str, tool: str, arguments: dict[str, Any] | None = None, *,
             call_id: str | None = None) -> Call:
        """Submit one call; repeating its ``call_id`` never repeats the effect.

        ``call_id`` None: the gateway derives one from the run, tool and arguments (an identical
        repeated call is answered from the ledger). Pass the framework's own persisted tool-call
        id when it has one.

        Raises:
            CallConflict, PolicyRefused, InvalidInput, RunStopped, RunBusy, ... (errors module).
        """
        args = dict(arguments or {})
        try:
            body = self._send(p.call_request(run_id, tool, args, call_id))
        except WaitingForApproval as exc:
            body = p.waiting_body(exc, run_id)
        return Call(self, CallResult.from_json(body), tool, args)

    def finish(self, run_id: str, summary: str = "", *, call_id: str | None = None) -> Call:
        """End the plan; the verifier decides (``finished`` only for a run that completed)."""
        return self.call(run_id, "finish", {"summary": summary}, call_id=call_id)

    def call_record(self, run_id: str, call_id: str) -> CallRecord:
        """One call id as the committed checkpoint records it."""
        return CallRecord.from_json(self._send(p.agent_get(p.run_path(run_id, f"/calls/{p._seg(call_id)}"))))

    def receipts(self, run_id: str) -> list[ReceiptEntry]:
        """Every executed write of the run, oldest first."""
        return [ReceiptEntry.from_json(r) for r in self._send(p.agent_get(p.run_path(run_id, "/receipts")))]

    def pending_approval(self, run_id: str) -> PendingApproval:
        """The approval the run waits for (``waiting`` False: none)."""
        return PendingApproval.from_json(self._send(p.agent_get(p.run_path(run_id, "/approval"))))

    def read_file(self, run_id: str, path: str) -> FileContent:
        """One file of the run's directory (only paths its policy covers)."""
        return FileContent.from_json(self._send(p.agent_get(p.run_path(run_id, "/file"), {"path": path})))

    def list_directory(self, run_id: str, path: str = "") -> DirectoryListing:
        """One folder of the run's directory (only what its policy covers)."""
        return DirectoryListing.from_json(self._send(p.agent_get(p.run_path(run_id, "/files"), {"path": path})))

    # The operator endpoints (an operator credential; one tenant).
    def start_run(self, task: str) -> RunInfo:
        """Start a run of the task spec ``task`` (a name the operator put in the server's spec folder)."""
        return RunInfo.from_json(self._send(p.operator_request("POST", "/runs", {"task": task})))

    def operator_run(self, run_id: str) -> RunInfo:
        return RunInfo.from_json(self._send(p.operator_request("GET", f"/runs/{p._seg(run_id)}")))

    def cancel_run(self, run_id: str) -> str:
        """Cancel a run of the tenant; returns its phase afterwards."""
        return str(self._send(p.operator_request("POST", f"/runs/{p._seg(run_id)}/cancel"))["phase"])

    def issue_token(self, *, run_id: str | None = None, run_ids: list[str] | None = None, task_id: str = "",
                    agent: str = "", actions: list[str] | None = None) -> IssuedToken:
        """A gateway token for one run, or per agent for several runs or a task of the tenant."""
        body = self._send(p.operator_request("POST", "/tokens", p.token_body(run_id, run_ids, task_id, agent,
                                                                              actions)))
        return IssuedToken(token_id=body["token_id"], token=body["token"], run_id=body.get("run_id"))

    def revoke_token(self, token_id: str) -> bool:
        """Revoke a gateway token of the tenant; True when a live one was revoked."""
        return bool(self._send(p.operator_request("DELETE", f"/tokens/{p._seg(token_id)}"))["revoked"])
