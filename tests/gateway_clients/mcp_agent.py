"""An agent outside Ratchet that drives a run through the gateway with the official ``mcp`` client.

Usage::

    RATCHET_GATEWAY_TOKEN=rgw_... python tests/gateway_clients/mcp_agent.py \\
        --url http://127.0.0.1:8765/mcp --calls 5 [--finish]

It writes ``notes/<i>.txt`` for ``i`` in ``0..calls-1``, one tool call each with the call id
``note-<i>``, and prints one JSON line per result. Killed and started again, it simply repeats
every call id from the start: the gateway answers a call it already executed with the original
receipt, so each call id has exactly one effect. A retryable refusal (the run's lease is still
held by a gateway that died) is repeated with the same call id after a pause.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import anyio
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def drive(url: str, token: str, calls: int, finish: bool) -> int:
    """Make the calls; returns the number of calls that ended executed (or finished)."""
    done = 0
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with Client(streamable_http_client(url, http_client=http)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        print(json.dumps({"tools": sorted(tools)}), flush=True)
        plan = [("write_file", {"call_id": f"note-{i}", "path": f"notes/{i}.txt", "content": f"note {i}\n"})
                for i in range(calls)]
        if finish:
            plan.append(("finish", {"call_id": "finish", "summary": "all notes written"}))
        for name, arguments in plan:
            while True:
                result = await client.call_tool(name, arguments)
                body = result.structured_content or {}
                print(json.dumps({"call_id": arguments["call_id"], **body}), flush=True)
                if result.is_error and body.get("error", {}).get("retryable"):
                    time.sleep(0.5)
                    continue
                break
            if not result.is_error:
                done += 1
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8765/mcp")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--finish", action="store_true")
    args = parser.parse_args()
    token = os.environ.get("RATCHET_GATEWAY_TOKEN", "")
    if not token:
        print("set RATCHET_GATEWAY_TOKEN", file=sys.stderr)
        return 2
    done = anyio.run(drive, args.url, token, args.calls, args.finish)
    print(json.dumps({"outcome": "done", "executed": done}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
