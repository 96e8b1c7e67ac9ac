"""What one gateway call costs, counted on every database it touches, beside the engine's write.

For the same workspace write (``write_file`` of a small note), :func:`gateway_counts` counts with
:class:`runtime.bench.counting.DatabaseCounter` -- statements, round trips, durable transactions
on the main database and the high-water mark store, and the client fsyncs of this process:

* ``direct``: the workspace adapter's ``execute`` alone (no database: its journal and file);
* ``call_submit``: the gateway service in-process (DESIGN.md section 5.12);
* ``json_api``: ``POST /api/v1/runs/<run>/calls`` through Django's request handling (the test
  client: no socket, the same view, authentication and service);
* ``mcp``: ``tools/call`` through the MCP server, in memory (the official SDK's client talking
  to :func:`runtime.gateway.mcp_server.gateway_server` in one session, as an agent keeps it; the
  server runs the call in a worker thread, which the counter sees too);
* ``engine_write``: one write action of a scripted workspace run driven by the engine
  (:func:`runtime.bench.write_counts.steps_counted`), the same write without the gateway.

Each is the median over :data:`UNITS` calls (each a new ``call_id``; the first call of each
surface is left out, it may open the run's session).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio
from django.test import Client as HttpClient

from runtime.adapters.factory import open_adapter
from runtime.bench.counting import DatabaseCounter, DatabaseCounts, count_of
from runtime.bench.write_counts import steps_counted, workspace_task
from runtime.core.checkpoint import Action
from runtime.engine import run_start
from runtime.errors import BenchmarkError
from runtime.evidence.attachments import attachment_blob, attachment_put
from runtime.gateway.calls import call_submit
from runtime.gateway.mcp_server import gateway_server

UNITS = 5
"""Counted calls per surface (after one uncounted first call)."""

SURFACES = ("direct", "call_submit", "json_api", "mcp", "engine_write")
"""What :func:`gateway_counts` reports, in order."""


def _counted(counter: DatabaseCounter, call: Callable[[int], None]) -> list[DatabaseCounts]:
    units: list[DatabaseCounts] = []
    call(0)  # uncounted: a surface's first call may open the run's session
    for n in range(1, UNITS + 1):
        before = counter.snapshot()
        call(n)
        units.append(counter.snapshot().minus(before))
    return units


def _arguments(surface: str, n: int) -> dict[str, Any]:
    return {"path": f"notes/{surface}-{n}.txt", "content": f"{surface} {n}\n"}


def _executed(status: str, surface: str) -> None:
    if status != "executed":
        raise BenchmarkError("a counted gateway call did not execute", surface=surface,
                             status=status)


def gateway_counts(*, run_id: str, token: str, root: Path) -> dict[str, dict[str, Any]]:
    """Count one write on each of :data:`SURFACES` (``run_id``/``token``: an external run of
    the gateway bench and a token for it; ``root``: a scratch directory); return, per surface,
    ``{"label", "statements", "round_trips", "durable_transactions", "fsyncs", "units"}``.

    Raises:
        BenchmarkError: a counted call did not execute, or the engine's run did not complete.
    """
    counter = DatabaseCounter()
    direct_ws = root / "counted-direct"
    direct_ws.mkdir()
    adapter = open_adapter("workspace", direct_ws)
    http = HttpClient(SERVER_NAME="127.0.0.1")
    # Stored before counting: the direct write is the adapter's work alone.
    digests = [attachment_put(data=f"direct {n}\n".encode()) for n in range(UNITS + 1)]

    def direct(n: int) -> None:
        action = Action(kind="write_file", target=f"notes/{n}.txt",
                        params={"content": digests[n], "executable": False})
        adapter.execute(action, idempotency_key=f"bench-counted-direct-{n}",
                        intent_digest=action.intent_digest(), fencing_token=1,
                        blobs=attachment_blob)

    def in_process(n: int) -> None:
        result = call_submit(run_id=run_id, call_id=f"counted-{n}", tool="write_file",
                             arguments=_arguments("submit", n), token=token)
        _executed(result.status, "call_submit")

    def json_api(n: int) -> None:
        response = http.post(f"/api/v1/runs/{run_id}/calls", content_type="application/json",
                             data=json.dumps({"call_id": f"json-{n}", "tool": "write_file",
                                              "arguments": _arguments("json", n)}),
                             HTTP_AUTHORIZATION=f"Bearer {token}")
        body = response.json() if response.status_code == 200 else {}
        _executed(str(body.get("status", response.status_code)), "json_api")

    def mcp_session() -> list[DatabaseCounts]:
        # One MCP session for all the calls, as an agent keeps it: opening it (and the tool list
        # the SDK's client reads before its first call) belongs to the uncounted first call.
        from mcp.client.client import Client

        async def calls() -> list[DatabaseCounts]:
            units: list[DatabaseCounts] = []
            async with Client(gateway_server(stdio_token=token)) as client:
                for n in range(UNITS + 1):
                    before = counter.snapshot()
                    result = await client.call_tool("write_file", {"call_id": f"mcp-{n}", **_arguments("mcp", n)})
                    content = result.structured_content or {}
                    _executed("error" if result.is_error else str(content.get("status")), "mcp")
                    if n:
                        units.append(counter.snapshot().minus(before))
            return units
        return anyio.run(calls)

    found: dict[str, list[DatabaseCounts]] = {}
    with counter.installed():
        found["direct"] = _counted(counter, direct)
        found["call_submit"] = _counted(counter, in_process)
        found["json_api"] = _counted(counter, json_api)
        found["mcp"] = mcp_session()
    engine_run = run_start(spec_path=workspace_task(directory=root / "counted-engine",
                                                    task_id="bench-gateway-engine",
                                                    writes=UNITS + 1),
                           worker="bench-gateway-engine")
    _steps, writes = steps_counted(run_id=engine_run, worker="bench-gateway-engine")
    found["engine_write"] = writes[1:] or writes
    labels = {"direct": "direct workspace adapter write (no database)",
              "call_submit": "gateway call, in-process call_submit",
              "json_api": "gateway call, JSON API (POST /api/v1/runs/<run>/calls)",
              "mcp": "gateway call, MCP tools/call (in memory)",
              "engine_write": "engine write action (propose + execute), same write"}
    return {surface: {k: v for k, v in asdict(count_of(surface, labels[surface], found[surface],
                                                        fsyncs=True)).items() if k != "name"}
            for surface in SURFACES}
