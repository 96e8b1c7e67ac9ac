"""Story: an MCP host starts Ratchet's stdio server from the agents guide's configuration block,
from a working directory of its own, and drives a run through it (DESIGN.md section 5.12).

The host here is the official ``mcp`` client: it starts the documented command (the
``ratchet-mcp`` console script, by absolute path) with only the documented environment over the
client's minimal default one, in a scratch directory that holds nothing of Ratchet. Through MCP
alone it reads, writes once, repeats a call without a second effect, and sees its receipts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.docs.pages import blocks
from tests.gateway_clients.conftest import agent_run, effects
from tests.helpers.procs import child_env

DOCUMENTED_PREFIX = "/home/me/ratchet/.venv/bin/"


def documented_entry() -> dict:
    """The ``ratchet`` stdio entry of the guide's ``mcpServers`` block."""
    [block] = [b for b in blocks("guides/agents.md") if b.title == "mcp-hosts.json"]
    return json.loads(block.body)["mcpServers"]["ratchet"]


def server_environment(token: str) -> dict[str, str]:
    """The documented ``env`` with this test's values: the token, and what every Ratchet process
    of the test gets (the database, the var dir, the keys); no ``PYTHONPATH``, no settings module."""
    documented = documented_entry()["env"]
    assert set(documented) == {"RATCHET_GATEWAY_TOKEN", "DATABASE_URL"}
    ours = {k: v for k, v in child_env().items() if k.startswith("RATCHET_") or k == "DATABASE_URL"}
    return {**ours, "RATCHET_GATEWAY_TOKEN": token}


def test_the_documented_stdio_entry_is_the_console_script_by_absolute_path() -> None:
    entry = documented_entry()
    assert entry["command"] == DOCUMENTED_PREFIX + "ratchet-mcp" and "args" not in entry
    assert (Path(sys.executable).parent / "ratchet-mcp").is_file(), "pip install -e . installs the console script"


def test_an_mcp_host_starts_the_documented_server_elsewhere_and_writes_once(web, tmp_path: Path) -> None:
    run = agent_run(web)
    elsewhere = tmp_path / "host-home"
    elsewhere.mkdir()
    entry = documented_entry()
    command = entry["command"].replace(DOCUMENTED_PREFIX, f"{Path(sys.executable).parent}/")
    params = StdioServerParameters(command=command, env=server_environment(run.token), cwd=str(elsewhere))
    note = {"path": "notes/host.txt", "content": "from an MCP host\n"}

    async def host() -> list[dict]:
        answers = []
        async with Client(stdio_client(params)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"write_file", "finish", "read_file", "list_receipts", "pending_approval"} <= tools
            for name, arguments in (("write_file", note), ("write_file", note), ("read_file", {"path": note["path"]}),
                                    ("list_receipts", {})):
                result = await client.call_tool(name, arguments)
                assert not result.is_error, result
                answers.append(result.structured_content or {})
        return answers

    first, again, read, receipts = anyio.run(host)
    assert first["status"] == "executed" and first["call_id"].startswith("d-")  # derived: the host sent none
    assert again["repeated"] and again["receipt"] == first["receipt"]
    assert read["content"] == note["content"]
    assert [r["call_id"] for r in receipts["receipts"]] == [first["call_id"]]
    assert list(effects(web, run.run_id).values()) == [1]
    assert list(elsewhere.iterdir()) == [], "the server wrote nothing into the host's working directory"
