"""A LangGraph agent whose tools come from Ratchet's MCP server over stdio (``langchain-mcp-adapters``).

Usage (the host's own environment: ``langchain-mcp-adapters`` pins ``mcp<2``, Ratchet's server
needs ``mcp>=2``, so the host and the server live in separate environments, as an MCP host and
the servers it starts usually do)::

    RATCHET_GATEWAY_TOKEN=rgw_... python tests/gateway_clients/langgraph/mcp_host.py \\
        --server-python /abs/ratchet/.venv/bin/python --manage /abs/ratchet/manage.py \\
        --model http://127.0.0.1:PORT/v1

The host starts ``manage.py gateway --stdio`` by its absolute command from its own working
directory, passes the token in the server's environment, and runs ``create_react_agent`` with
the MCP tools (no ``call_id`` from the model: the gateway derives one). Prints one JSON line per
tool message, then ``{"outcome": "done", "tools": [...]}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
from langchain_core.messages import ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

SYSTEM = "You keep notes through Ratchet's MCP tools. Write, read back, check the receipts, then finish."
TASK = "Write notes/mcp.txt, read it back, list the receipts and finish."


async def drive(server_python: str, manage: str, model_url: str) -> None:
    # The server's own environment: everything of ours but the host's PYTHONPATH (its mcp<2).
    server_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    client = MultiServerMCPClient({"ratchet": {"transport": "stdio", "command": server_python,
                                               "args": [manage, "gateway", "--stdio"], "env": server_env}})
    async with client.session("ratchet") as session:
        tools = await load_mcp_tools(session)
        model = ChatOpenAI(model="fake-model", base_url=model_url, api_key="not-a-key", max_retries=0)
        agent = create_react_agent(model, tools, prompt=SYSTEM)
        result = await agent.ainvoke({"messages": [("user", TASK)]}, {"recursion_limit": 30})
    for message in result["messages"]:
        if isinstance(message, ToolMessage):
            print(json.dumps({"tool": message.name, "content": _text(message.content), "status": message.status}),
                  flush=True)
    print(json.dumps({"outcome": "done", "tools": sorted(t.name for t in tools)}), flush=True)


def _text(content: str | list[Any]) -> str:
    """A tool message's text (the adapter gives a list of content blocks)."""
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-python", required=True)
    parser.add_argument("--manage", required=True)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    anyio.run(drive, args.server_python, args.manage, args.model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
