"""No MCP session without a gateway token (DESIGN.md section 5.12).

The MCP SDK opens a session for any ``initialize`` request and keeps up to 10,000 of them; the
gateway authorised only the tool calls inside a session. So a client without a token could fill
the session table, and with it the gateway's memory, until valid agents got 503. This ASGI
middleware stands in front of the streamable HTTP app: a request that would open a session (no
``mcp-session-id`` header) must carry a valid ``Authorization: Bearer`` token, admitted and
counted against its rate limit like any call (``token_request_admit``); otherwise it is answered
401 with the gateway's JSON error and no session is created. Requests inside an existing session
pass on to the SDK, whose tool handlers check the token of every call as before.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from asgiref.sync import sync_to_async

from runtime.errors import GatewayError, GatewayTokenMissingError
from runtime.gateway.tokens import token_request_admit

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

SESSION_HEADER = b"mcp-session-id"


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers") or ():
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" and token.strip() else None
    return None


def _opens_session(scope: Scope) -> bool:
    if scope.get("type") != "http" or scope.get("method") != "POST":
        return False
    return not any(name.lower() == SESSION_HEADER for name, _ in scope.get("headers") or ())


class SessionAdmission:
    """Wrap the MCP streamable HTTP ``app`` so that only a token holder can open a session.

    Args:
        app: the ASGI app of the MCP server (``Server.streamable_http_app``).
        admit: ``admit(token=...)`` raising a :class:`GatewayError` for a refused token
            (default :func:`token_request_admit`, run in a worker thread: it reads the database).
    """

    def __init__(self, app: App, *, admit: Callable[..., Any] = token_request_admit) -> None:
        self.app = app
        self.admit = sync_to_async(admit, thread_sensitive=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _opens_session(scope):
            token = _bearer(scope)
            try:
                if token is None:
                    raise GatewayTokenMissingError()
                await self.admit(token=token)
            except GatewayError as exc:
                await _refuse(send, exc)
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, exc: GatewayError) -> None:
    body = json.dumps({"error": {"code": exc.code, "message": exc.message, "hint": exc.hint,
                                 "retryable": exc.retryable}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if exc.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="ratchet-gateway"'))
    await send({"type": "http.response.start", "status": exc.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
