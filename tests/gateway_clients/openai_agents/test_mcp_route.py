"""Story: an OpenAI Agents SDK agent uses Ratchet's MCP server instead of function tools, over
stdio (``MCPServerStdio`` starting the ``ratchet-mcp`` console script from another working
directory) and over streamable HTTP (``MCPServerStreamableHttp`` against ``manage.py gateway``).

The SDK passes no tool-call id over MCP, so the gateway derives the call id from the call
(DESIGN.md section 5.12): the same conversation repeated writes nothing twice.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from agents import Agent, OpenAIChatCompletionsModel, Runner
from agents.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHttp
from openai import AsyncOpenAI

from runtime.models import Run
from tests.gateway.support import free_port, gateway_start, gateway_stop
from tests.gateway_clients.conftest import agent_run, effects
from tests.gateway_clients.openai_agents.support import plan
from tests.gateway_clients.test_mcp_hosts import server_environment


def _body(output: object) -> dict:
    """The gateway's JSON answer inside the SDK's tool output (the MCP result's text content)."""
    text = output["text"] if isinstance(output, dict) else output
    return json.loads(str(text))


def _twice(server: MCPServer, model_url: str) -> list[list[dict]]:
    """Run the agent twice over ``server``; each run's tool outputs."""
    async def story() -> list[list[dict]]:
        model = OpenAIChatCompletionsModel(model="fake", openai_client=AsyncOpenAI(base_url=model_url, api_key="x"))
        outputs = []
        async with server:
            agent = Agent(name="notes", instructions="Keep the notes.", mcp_servers=[server], model=model)
            for _ in range(2):
                result = await Runner.run(agent, "Write the notes.")
                outputs.append([_body(i.output) for i in result.new_items if i.type == "tool_call_output_item"])
        return outputs

    return asyncio.run(story())


def _assert_written_once(web, run, outputs: list[list[dict]]) -> None:
    first, again = outputs
    assert [o["status"] for o in first] == ["executed", "executed", "finished"]
    assert all(o["call_id"].startswith("d-") for o in first)  # derived by the gateway
    assert [o["call_id"] for o in again] == [o["call_id"] for o in first] and all(o["repeated"] for o in again)
    assert sorted(effects(web, run.run_id).values()) == [1, 1]
    assert (web.workspace / "notes" / "b.txt").read_text() == "b\n"
    assert Run.objects.get(run_id=run.run_id).phase == "completed"


def test_the_sdk_drives_a_run_through_the_stdio_server_started_elsewhere(web, fake_model, tmp_path: Path) -> None:
    model = fake_model(plan(("notes/a.txt", "a\n"), ("notes/b.txt", "b\n")))
    run = agent_run(web)
    (tmp_path / "elsewhere").mkdir()
    server = MCPServerStdio(params={"command": str(Path(sys.executable).parent / "ratchet-mcp"),
                                    "env": server_environment(run.token), "cwd": str(tmp_path / "elsewhere")},
                            client_session_timeout_seconds=60)
    _assert_written_once(web, run, _twice(server, model.base_url))


def test_the_sdk_drives_a_run_through_the_streamable_http_server(web, fake_model) -> None:
    model = fake_model(plan(("notes/a.txt", "a\n"), ("notes/b.txt", "b\n")))
    run = agent_run(web)
    port = free_port()
    gateway = gateway_start(port)
    try:
        server = MCPServerStreamableHttp(params={"url": f"http://127.0.0.1:{port}/mcp",
                                                 "headers": {"Authorization": f"Bearer {run.token}"}},
                                         client_session_timeout_seconds=60)
        outputs = _twice(server, model.base_url)
    finally:
        gateway_stop(gateway)
    _assert_written_once(web, run, outputs)
