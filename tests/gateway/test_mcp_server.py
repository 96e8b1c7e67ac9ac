"""The MCP server lists a run's tools and puts each tool call through the gateway service."""

import anyio
import pytest
from mcp.client.client import Client

from runtime.gateway.mcp_server import gateway_server
from runtime.gateway.tokens import token_revoke
from runtime.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


def _session(token, fn):
    async def main():
        async with Client(gateway_server(stdio_token=token)) as client:
            return await fn(client)
    return anyio.run(main)


def test_it_lists_the_runs_tools_with_an_optional_call_id_and_the_read_tools(gw):
    async def names(client):
        return {t.name: t for t in (await client.list_tools()).tools}
    tools = _session(gw.token, names)
    assert set(tools) == {"write_file", "delete_file", "finish", "read_file", "list_directory", "run_status",
                          "list_receipts", "pending_approval"}
    assert "call_id" in tools["write_file"].input_schema["properties"]
    assert "call_id" not in tools["write_file"].input_schema["required"]
    assert tools["read_file"].annotations.read_only_hint is True


def test_it_executes_a_tool_call_once_per_call_id(gw):
    async def twice(client):
        args = {"call_id": "m1", "path": "notes/m.txt", "content": "from mcp\n"}
        return await client.call_tool("write_file", args), await client.call_tool("write_file", args)
    first, second = _session(gw.token, twice)
    assert not first.is_error and first.structured_content["status"] == "executed"
    assert second.structured_content["repeated"] is True
    assert second.structured_content["receipt"] == first.structured_content["receipt"]
    assert list(gw.effects().values()) == [1]


@pytest.mark.parametrize(("tool", "arguments", "code"), [
    ("format_disk", {"call_id": "x"}, "unknown_action"),
    ("write_file", {"call_id": "x", "path": "notes/a.txt"}, "invalid_input"),
    ("write_file", {"call_id": "no spaces allowed", "path": "notes/a.txt", "content": "x"}, "invalid_input"),
    ("write_file", {"call_id": "x", "path": "secrets/a.txt", "content": "x"}, "policy_refused"),
])
def test_it_answers_bad_tool_calls_with_a_typed_error(gw, tool, arguments, code):
    async def call(client):
        return await client.call_tool(tool, arguments)
    result = _session(gw.token, call)
    assert result.is_error and result.structured_content["error"]["code"] == code
    assert gw.effects() == {} and Run.objects.get(run_id=gw.run_id).generation == 1
    assert gw.token.split("_", 2)[2] not in str(result.structured_content)


def test_a_revoked_token_gets_no_tools_and_no_calls(gw):
    token_revoke(token_id=gw.token_id)

    async def call(client):
        return await client.call_tool("write_file", {"call_id": "r", "path": "notes/r.txt", "content": "r"})
    result = _session(gw.token, call)
    assert result.is_error and result.structured_content["error"]["code"] == "token_invalid"
    assert gw.effects() == {}


def test_an_agent_token_names_its_run_and_is_refused_without_one(gw):
    from runtime.gateway.tokens import token_issue_agent

    issued = token_issue_agent(tenant_id=Run.objects.get(run_id=gw.run_id).tenant_id, agent="bot",
                               run_ids=[gw.run_id])

    async def call(client):
        return await client.call_tool("write_file", {"call_id": "a1", "path": "notes/a.txt", "content": "a\n"})

    async def with_run():
        async with Client(gateway_server(stdio_token=issued.token, stdio_run=gw.run_id)) as client:
            return await call(client)

    refused = _session(issued.token, call)
    assert refused.is_error and refused.structured_content["error"]["code"] == "token_scope"
    done = anyio.run(with_run)
    assert not done.is_error and done.structured_content["status"] == "executed"
    assert list(gw.effects().values()) == [1]
