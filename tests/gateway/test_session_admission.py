"""Story: a client without a token tries to open MCP sessions on the gateway (N7, DESIGN.md section 5.12).

Before, the SDK opened a session for anyone and kept up to 10,000 of them, so tokenless clients
could fill the gateway until valid agents got 503. Now opening a session needs a valid bearer
token (counted against its rate limit); without one the answer is 401 with the gateway's JSON
error and no session exists.
"""

from __future__ import annotations

import json

import anyio
import httpx
import pytest

from runtime.errors import GatewayTokenError
from runtime.gateway.session_admission import SessionAdmission
from tests.gateway.support import free_port, gateway_start, gateway_stop

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "probe", "version": "0"}}}


class Inner:
    """The MCP app behind the middleware: counts the requests that reach it (sessions opened)."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope, receive, send) -> None:
        self.calls += 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def _admit(*, token: str) -> None:
    if token != "rgw_good_token":
        raise GatewayTokenError()


def _post(app, headers: dict[str, str]) -> httpx.Response:
    async def main() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
            return await c.post("/mcp", json=INITIALIZE, headers=headers)
    return anyio.run(main)


@pytest.mark.parametrize(("headers", "code"), [({}, "token_missing"),
                                                ({"Authorization": "Basic abc"}, "token_missing"),
                                                ({"Authorization": "Bearer rgw_forged"}, "token_invalid")])
def test_n7_it_opens_no_session_without_a_valid_token(headers: dict[str, str], code: str) -> None:
    inner = Inner()

    response = _post(SessionAdmission(inner, admit=_admit), headers)

    assert response.status_code == 401 and response.json()["error"]["code"] == code
    assert inner.calls == 0


def test_it_lets_a_token_holder_open_a_session_and_passes_session_requests_on() -> None:
    inner = Inner()
    app = SessionAdmission(inner, admit=_admit)

    assert _post(app, {"Authorization": "Bearer rgw_good_token"}).status_code == 200
    assert _post(app, {"mcp-session-id": "abc"}).status_code == 200  # the SDK checks the session
    assert inner.calls == 2


@pytest.mark.django_db(transaction=True)
def test_a_real_gateway_refuses_a_tokenless_initialize_and_serves_a_token_holder(gw) -> None:
    port = free_port()
    proc = gateway_start(port, RATCHET_LEASE_SECONDS="60")
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        accept = {"Accept": "application/json, text/event-stream"}
        refused = httpx.post(url, json=INITIALIZE, headers=accept, timeout=60)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "token_missing"
        admitted = httpx.post(url, json=INITIALIZE, timeout=60,
                              headers={**accept, "Authorization": f"Bearer {gw.token}"})
        assert admitted.status_code == 200, admitted.text
        assert admitted.headers.get("mcp-session-id")
        assert gw.token.split("_", 2)[2] not in refused.text + json.dumps(dict(admitted.headers))
    finally:
        gateway_stop(proc)
