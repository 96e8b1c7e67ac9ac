"""The requests of the gateway's JSON API and the reading of its answers, shared by the sync and
the async client so the two cannot drift apart."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import httpx

from ratchet_client.errors import RatchetError, TokenMissing, TransportError, error_from

API = "/api/v1"


@dataclass(frozen=True)
class Request:
    """One request: ``who`` says which bearer it needs (the agent token or the operator credential)."""

    method: str
    path: str
    who: Literal["agent", "operator"]
    params: dict[str, str] | None = None
    body: Any = None


def _seg(value: str) -> str:
    return quote(str(value), safe="")


def call_request(run_id: str, tool: str, arguments: dict[str, Any] | None, call_id: str | None) -> Request:
    body: dict[str, Any] = {"tool": tool, "arguments": dict(arguments or {})}
    if call_id:
        body["call_id"] = call_id
    return Request("POST", f"{API}/runs/{_seg(run_id)}/calls", "agent", body=body)


def agent_get(path: str, params: dict[str, str] | None = None) -> Request:
    return Request("GET", f"{API}{path}", "agent", params=params)


def run_path(run_id: str, rest: str = "") -> str:
    return f"/runs/{_seg(run_id)}{rest}"


def operator_request(method: str, path: str, body: Any = None) -> Request:
    return Request(method, f"{API}/operator{path}", "operator", body=body)


def token_body(run_id: str | None, run_ids: list[str] | None, task_id: str, agent: str,
               actions: list[str] | None) -> dict[str, Any]:
    return {"run_id": run_id, "run_ids": list(run_ids or []), "task_id": task_id, "agent": agent,
            "actions": list(actions or [])}


def bearer(request: Request, token: str | None, credential: str | None) -> dict[str, str]:
    """The Authorization header ``request`` needs.

    Raises:
        TokenMissing: the client was made without that kind of bearer (nothing was sent).
    """
    secret = token if request.who == "agent" else credential
    if not secret:
        kind = "an agent token (token=...)" if request.who == "agent" else "an operator credential " \
                                                                           "(operator_credential=...)"
        raise TokenMissing(f"this request needs {kind}; nothing was sent", hint="make the client with it")
    return {"Authorization": f"Bearer {secret}"}


def transport_error(exc: httpx.HTTPError) -> TransportError:
    return TransportError(f"no answer from the gateway: {type(exc).__name__}", retryable=True,
                          hint="repeat the call with the same call id; it never executes twice")


def answer(response: httpx.Response) -> Any:
    """The JSON body of a successful answer.

    Raises:
        RatchetError (the subclass of the server's code): the server refused.
    """
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code >= 400:
        raise error_from(response.status_code, body)
    if body is None and response.status_code != 204:
        raise RatchetError(f"the server answered HTTP {response.status_code} without JSON",
                           status=response.status_code)
    return body


def waiting_body(exc: RatchetError, run_id: str) -> dict[str, Any]:
    """A ``waiting_for_approval`` refusal (another call waits) as a call result to wait on."""
    ctx = exc.context
    return {"status": "waiting_for_approval", "run_id": str(ctx.get("run_id") or run_id),
            "call_id": str(ctx.get("call_id") or ""), "phase": str(ctx.get("phase") or "awaiting_approval"),
            "approval_url": ctx.get("approval_url"), "detail": exc.message}

