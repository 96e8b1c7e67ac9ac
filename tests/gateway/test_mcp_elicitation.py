"""Story: a call that needs an approval, through a real gateway process, with and without elicitation.

The official ``mcp`` client talks streamable HTTP to ``manage.py gateway`` on loopback. A client
that declares elicitation is asked whether to wait; accepting only lets the call wait (the
gateway reads the run row), and the call executes once when a human's approval -- signed by the
approval service, here ``approval_grant`` as the dashboard calls it -- arrives within the wait. A
client without the capability gets the "waiting for approval" result at once, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import anyio
import pytest
from django.db import connection
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import ElicitResult

from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.models import Run, TraceEvent
from tests.gateway.support import free_port, gateway_start, gateway_stop

pytestmark = pytest.mark.django_db(transaction=True)

STEADY = {"RATCHET_LEASE_SECONDS": "60", "RATCHET_GATEWAY_APPROVAL_POLL_SECONDS": "0.1"}
"""Nothing is killed here: a lease long enough for a slow machine, and a quick poll."""

RISKY = {"call_id": "risky", "path": "config/limits.toml", "content": "max = 3\n"}
"""A high-risk write: ``config/*.toml`` needs an approval in the story's policy."""


@pytest.fixture
def gateway_url(gw) -> Iterator[str]:
    """A gateway process started after the story's keys are in place (it verifies their signatures)."""
    port = free_port()
    proc = gateway_start(port, RATCHET_GATEWAY_APPROVAL_WAIT_SECONDS="120", **STEADY)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        gateway_stop(proc)


def _call(url: str, token: str, arguments: dict, callback=None, headers: dict | None = None, mode: str = "auto"):
    async def main():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"} if headers is None else headers)
        async with Client(streamable_http_client(url, http_client=http), elicitation_callback=callback,
                          mode=mode) as client:
            return await client.call_tool("write_file", arguments)
    return anyio.run(main)


def _grant_later(run_id: str) -> threading.Thread:
    """The human in the dashboard: approve the waiting write from another thread."""
    def grant() -> None:
        try:
            [item] = approvals_waiting(run_ids=[run_id])
            approval_grant(run_id=run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)
        finally:
            connection.close()
    thread = threading.Thread(target=grant)
    return thread


@pytest.mark.parametrize("mode", [
    "auto",  # 2026-07-28: an input_required result, answered by repeating the call
    "legacy",  # the initialize handshake: an elicitation/create request on the session's back channel
])
def test_it_asks_an_eliciting_client_to_wait_and_executes_once_when_a_human_approves(gw, gateway_url, mode):
    asked, grant = [], _grant_later(gw.run_id)

    async def accept(context, params):
        asked.append(params.message)
        grant.start()  # the approval arrives while the gateway waits
        return ElicitResult(action="accept", content={})

    result = _call(gateway_url, gw.token, RISKY, accept, mode=mode)
    assert asked, result.structured_content
    grant.join(timeout=60)
    assert len(asked) == 1 and "Accepting approves nothing" in asked[0] and f"/runs/{gw.run_id}/" in asked[0]
    assert not result.is_error, result.structured_content
    assert result.structured_content["status"] == "executed"
    key = result.structured_content["idempotency_key"]
    assert gw.effects() == {key: 1}
    assert (gw.workspace / "config/limits.toml").read_text() == "max = 3\n"
    again = _call(gateway_url, gw.token, RISKY)
    assert again.structured_content["repeated"] is True and again.structured_content["receipt"] == \
        result.structured_content["receipt"]
    assert gw.effects() == {key: 1}


def test_a_client_without_elicitation_gets_the_waiting_result_at_once(gw, gateway_url):
    result = _call(gateway_url, gw.token, RISKY)
    body = result.structured_content
    assert not result.is_error and body["status"] == "waiting_for_approval"
    assert body["approval_url"].endswith(f"/runs/{gw.run_id}/")
    assert gw.effects() == {} and Run.objects.get(run_id=gw.run_id).phase == "awaiting_approval"


def test_a_declined_elicitation_gets_the_waiting_result_and_changes_nothing(gw, gateway_url):
    async def decline(context, params):
        return ElicitResult(action="decline")

    result = _call(gateway_url, gw.token, RISKY, decline)
    assert result.structured_content["status"] == "waiting_for_approval"
    assert gw.effects() == {} and Run.objects.get(run_id=gw.run_id).phase == "awaiting_approval"


def test_accepting_the_elicitation_never_approves_the_write(gw):
    port = free_port()
    proc = gateway_start(port, RATCHET_GATEWAY_APPROVAL_WAIT_SECONDS="1", **STEADY)
    try:
        async def accept(context, params):
            return ElicitResult(action="accept", content={})
        result = _call(f"http://127.0.0.1:{port}/mcp", gw.token, RISKY, accept)
    finally:
        gateway_stop(proc)
    body = result.structured_content
    assert body["status"] == "waiting_for_approval" and "no approval within 1 seconds" in body["detail"]
    assert gw.effects() == {} and Run.objects.get(run_id=gw.run_id).phase == "awaiting_approval"
    granted = TraceEvent.objects.filter(run_id=gw.run_id, event_type__in=("approval.granted", "approval.refreshed"))
    assert not granted.exists()


def test_a_request_without_a_token_is_told_to_send_one(gw, gateway_url):
    """No session opens without a token (runtime/gateway/session_admission.py): the answer is the
    gateway's JSON error, which says how to send one, and nothing runs."""
    import httpx

    refused = httpx.post(gateway_url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        headers={"Accept": "application/json, text/event-stream"}, timeout=60)
    error = refused.json()["error"]
    assert refused.status_code == 401 and error["code"] == "token_missing"
    assert "Authorization: Bearer" in error["message"]
    with pytest.raises(Exception):  # noqa: B017 - the client only says the server refused
        _call(gateway_url, gw.token, {**RISKY, "call_id": "no-token"}, headers={})
    assert gw.effects() == {}
