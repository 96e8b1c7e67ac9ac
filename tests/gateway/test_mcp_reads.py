"""Through MCP alone an agent reads a file, writes it, sees its receipts and waits for an approval;
ids are optional, resources and prompts answer, descriptions are plain text (DESIGN.md section 5.13)."""

import json

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.engine import run_start
from runtime.gateway.mcp_server import gateway_server
from runtime.gateway.tokens import token_issue
from runtime.models import ReviewCase, Run
from tests.gateway.conftest import GatewayStory
from tests.gateway.support import free_port, gateway_start, gateway_stop, write_external_task

pytestmark = pytest.mark.django_db(transaction=True)


def _session(gw, fn):
    async def main():
        async with Client(gateway_server(stdio_token=gw.token)) as client:
            return await fn(client)
    return anyio.run(main)


@pytest.fixture
def gw_files(tmp_path, ratchet_keys) -> GatewayStory:
    """An external run whose workspace holds files before it starts (a later change is drift)."""
    spec = write_external_task(tmp_path)
    (tmp_path / "ws" / "notes").mkdir(parents=True)
    (tmp_path / "ws" / "notes" / "todo.txt").write_text("buy milk\n")
    (tmp_path / "ws" / "secret.txt").write_text("not for agents\n")
    (tmp_path / "ws" / "README.md").write_text("# hello\n")
    run_id = run_start(spec_path=spec, worker="starter")
    issued = token_issue(run_id=run_id, agent="reader")
    return GatewayStory(run_id=run_id, token=issued.token, token_id=issued.token_id, workspace=tmp_path / "ws")


def test_an_agent_reads_writes_and_sees_its_receipts_through_mcp_alone(gw_files):
    gw = gw_files

    async def story(client):
        top = await client.call_tool("list_directory", {})
        notes = await client.call_tool("list_directory", {"path": "notes"})
        read = await client.call_tool("read_file", {"path": "notes/todo.txt"})
        hidden = await client.call_tool("read_file", {"path": "secret.txt"})
        escape = await client.call_tool("read_file", {"path": "../task.toml"})
        wrote = await client.call_tool("write_file", {"path": "notes/todo.txt", "content": "buy milk\nand tea\n"})
        again = await client.call_tool("write_file", {"path": "notes/todo.txt", "content": "buy milk\nand tea\n"})
        after = await client.call_tool("read_file", {"path": "notes/todo.txt"})
        receipts = await client.call_tool("list_receipts", {})
        status = await client.call_tool("run_status", {})
        return top, notes, read, hidden, escape, wrote, again, after, receipts, status

    top, notes, read, hidden, escape, wrote, again, after, receipts, status = _session(gw, story)
    names = [e["name"] for e in top.structured_content["entries"]]
    assert "notes" in names and "secret.txt" not in names and ".ratchet" not in names
    assert [e["path"] for e in notes.structured_content["entries"]] == ["notes/todo.txt"]
    assert read.structured_content["content"] == "buy milk\n"
    assert hidden.is_error and hidden.structured_content["error"]["code"] == "policy_refused"
    assert escape.is_error and escape.structured_content["error"]["code"] == "invalid_input"
    assert wrote.structured_content["status"] == "executed" and wrote.structured_content["call_id"].startswith("d-")
    assert again.structured_content["repeated"] is True, "an identical call without an id is idempotent"
    assert after.structured_content["content"] == "buy milk\nand tea\n"
    [receipt] = receipts.structured_content["receipts"]
    assert receipt["call_id"] == wrote.structured_content["call_id"]
    assert status.structured_content["phase"] == "running" and "tools" not in status.structured_content
    assert list(gw.effects().values()) == [1]


def test_a_call_while_an_approval_is_pending_answers_waiting_and_the_agent_can_read_it(gw, settings):
    settings.RATCHET_PUBLIC_BASE_URL = "https://ratchet.example.test"
    risky = {"path": "config/limits.toml", "content": "max = 3\n"}

    async def before(client):
        first = await client.call_tool("write_file", {"call_id": "risky", **risky})
        other = await client.call_tool("write_file", {"path": "notes/n.txt", "content": "n\n"})
        pending = await client.call_tool("pending_approval", {})
        resource = await client.read_resource(f"ratchet://runs/{gw.run_id}/approval")
        return first, other, pending, resource

    first, other, pending, resource = _session(gw, before)
    url = f"https://ratchet.example.test/runs/{gw.run_id}/"
    assert first.structured_content["status"] == "waiting_for_approval"
    assert first.structured_content["approval_url"] == url
    error = other.structured_content["error"]
    assert other.is_error and error["code"] == "waiting_for_approval" and error["retryable"] is True
    assert error["context"]["approval_url"] == url
    assert pending.structured_content["waiting"] is True and pending.structured_content["call_id"] == "risky"
    assert pending.structured_content["target"] == "config/limits.toml"
    assert json.loads(resource.contents[0].text)["approval_url"] == url
    assert Run.objects.get(run_id=gw.run_id).phase == "awaiting_approval"

    [item] = approvals_waiting(run_ids=[gw.run_id])
    approval_grant(run_id=gw.run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)

    async def after(client):
        return (await client.call_tool("write_file", {"call_id": "risky", **risky}),
                await client.call_tool("write_file", {"path": "notes/n.txt", "content": "n\n"}),
                await client.call_tool("pending_approval", {}))

    done, retried, settled = _session(gw, after)
    assert done.structured_content["status"] == "executed"
    assert retried.structured_content["status"] == "executed"
    assert settled.structured_content["waiting"] is False
    assert sorted(gw.effects().values()) == [1, 1]


def test_a_reused_call_id_with_other_arguments_is_refused_and_does_not_freeze_the_run(gw):
    async def story(client):
        first = await client.call_tool("write_file", {"call_id": "c1", "path": "notes/a.txt", "content": "a\n"})
        reused = await client.call_tool("write_file", {"call_id": "c1", "path": "notes/b.txt", "content": "b\n"})
        later = await client.call_tool("write_file", {"call_id": "c2", "path": "notes/b.txt", "content": "b\n"})
        return first, reused, later

    first, reused, later = _session(gw, story)
    assert reused.is_error and reused.structured_content["error"]["code"] == "call_conflict"
    assert reused.structured_content["error"]["context"]["executed"] is True
    assert later.structured_content["status"] == "executed"
    assert Run.objects.get(run_id=gw.run_id).phase == "running"
    assert not ReviewCase.objects.filter(run_id=gw.run_id).exists()
    assert (gw.workspace / "notes/a.txt").read_text() == "a\n" and (gw.workspace / "notes/b.txt").read_text() == "b\n"


def test_resources_prompts_and_plain_descriptions_answer(gw_files):
    gw = gw_files

    async def story(client):
        return (await client.list_resources(), await client.list_resource_templates(),
                await client.read_resource(f"ratchet://runs/{gw.run_id}/files/README.md"),
                await client.read_resource(f"ratchet://runs/{gw.run_id}/status"),
                await client.list_prompts(), await client.get_prompt("work-in-run"),
                (await client.list_tools()).tools)

    resources, templates, readme, status, prompts, prompt, tools = _session(gw, story)
    assert {r.uri for r in resources.resources} == {f"ratchet://runs/{gw.run_id}/{n}"
                                                    for n in ("status", "receipts", "approval")}
    assert templates.resource_templates[0].uri_template == f"ratchet://runs/{gw.run_id}/files/{{+path}}"
    assert readme.contents[0].text == "# hello\n"
    assert json.loads(status.contents[0].text)["run_id"] == gw.run_id
    assert [p.name for p in prompts.prompts] == ["work-in-run"]
    assert "waiting_for_approval" in prompt.messages[0].content.text
    for tool in tools:
        text = json.dumps([tool.description, tool.input_schema])
        assert "``" not in text and ":class:" not in text and ":func:" not in text, tool.name


def test_through_a_real_gateway_process_over_http(gw):
    """The official client over streamable HTTP to ``manage.py gateway``: reads, resources and the
    waiting answer are the gateway process's, with the public base URL it was started with."""
    port = free_port()
    proc = gateway_start(port, RATCHET_LEASE_SECONDS="60", RATCHET_PUBLIC_BASE_URL="https://ratchet.example.test")
    url = f"https://ratchet.example.test/runs/{gw.run_id}/"

    async def main():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {gw.token}"})
        async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:
            waiting = await client.call_tool("write_file", {"path": "config/a.toml", "content": "a = 1\n"})
            other = await client.call_tool("write_file", {"path": "notes/b.txt", "content": "b\n"})
            return (waiting, other, await client.call_tool("pending_approval", {}),
                    await client.list_resources(), await client.list_prompts())

    try:
        waiting, other, pending, resources, prompts = anyio.run(main)
    finally:
        gateway_stop(proc)
    assert waiting.structured_content["status"] == "waiting_for_approval"
    assert waiting.structured_content["approval_url"] == url
    assert other.structured_content["error"]["code"] == "waiting_for_approval"
    assert other.structured_content["error"]["retryable"] is True
    assert pending.structured_content["call_id"] == waiting.structured_content["call_id"]
    assert len(resources.resources) == 3 and [p.name for p in prompts.prompts] == ["work-in-run"]
