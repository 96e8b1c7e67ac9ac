"""Story: the documented MCP route -- ``langchain-mcp-adapters`` starts Ratchet's stdio MCP server
by its absolute command from another working directory, and a LangGraph agent writes, repeats
the write, reads it back and lists the receipts through it: one effect (DESIGN.md sections 5.12
and 5.13)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.engine import run_start
from runtime.gateway.tokens import token_issue
from runtime.models import Run
from tests.gateway.support import effects_by_key, write_external_task
from tests.helpers.procs import MANAGE, ROOT, child_env, events

pytestmark = pytest.mark.django_db(transaction=True)

HOST = ROOT / "tests" / "gateway_clients" / "langgraph" / "mcp_host.py"
NOTE = {"path": "notes/mcp.txt", "content": "written through MCP\n"}
SCRIPT = [
    {"tool": "write_file", "arguments": NOTE},
    {"tool": "write_file", "arguments": NOTE},  # a model repeating itself: no second effect
    {"tool": "read_file", "arguments": {"path": NOTE["path"]}},
    {"tool": "list_receipts", "arguments": {}},
    {"finish": "note written and read back"},
    {"content": "done"},
]


def _parsed(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text


def test_a_langgraph_agent_drives_a_run_through_the_stdio_mcp_server(
        tmp_path: Path, ratchet_keys, fake_model, mcp_host_site: Path) -> None:
    run_id = run_start(spec_path=write_external_task(tmp_path / "run"), worker="starter")
    token = token_issue(run_id=run_id, agent="mcp-host").token
    elsewhere = tmp_path / "host-home"
    elsewhere.mkdir()
    model = fake_model(SCRIPT)
    env = child_env(RATCHET_GATEWAY_TOKEN=token)
    env["PYTHONPATH"] = str(mcp_host_site)  # the host's mcp<2, for the host only
    host = subprocess.run([sys.executable, str(HOST), "--server-python", sys.executable, "--manage", str(MANAGE),
                           "--model", model.base_url], cwd=elsewhere, env=env, text=True, capture_output=True,
                          timeout=240)
    assert host.returncode == 0, host.stderr[-4000:]
    lines = events(host.stdout)
    assert lines[-1]["outcome"] == "done"
    assert {"write_file", "finish", "read_file", "list_receipts", "pending_approval"} <= set(lines[-1]["tools"])
    first, again, read, receipts, finish = (_parsed(line["content"]) for line in lines[:-1])
    assert first["status"] == "executed" and first["call_id"].startswith("d-")
    assert again["repeated"] and again["call_id"] == first["call_id"] and again["receipt"] == first["receipt"]
    assert read["content"] == NOTE["content"] and read["exists"]
    assert [r["call_id"] for r in receipts["receipts"]] == [first["call_id"]]
    assert finish["phase"] == "completed"
    assert Run.objects.get(run_id=run_id).phase == "completed"
    assert (tmp_path / "run" / "ws" / NOTE["path"]).read_text() == NOTE["content"]
    assert sorted(effects_by_key(tmp_path / "run" / "ws").values()) == [1]
