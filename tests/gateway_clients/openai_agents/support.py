"""What the OpenAI Agents SDK stories share: a run and its token, the fake model's scripts, the
agent script as a child process, and a web process armed at a crash point."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.gateway.operator_credentials import credential_issue
from tests.gateway.support import effects_by_key
from tests.gateway_clients.conftest import PUBLIC, Web
from tests.helpers.procs import MANAGE, ROOT, child_env, events, wait_listening

AGENT = Path(__file__).with_name("agent.py")


def write(path: str, content: str) -> dict[str, Any]:
    """A scripted model turn: one ``write_file`` tool call."""
    return {"tool": "write_file", "arguments": {"path": path, "content": content}}


def plan(*writes: tuple[str, str]) -> list[Any]:
    """The fake model's steps: each write, then ``finish``, then a final answer (no more tools)."""
    return [write(p, c) for p, c in writes] + [{"finish": "notes written"}, {"content": "All notes are written."}]


@dataclass
class AgentRun:
    """A run started through the operator API and a gateway token for it."""

    run_id: str
    token: str


def agent_run(web: Web) -> AgentRun:
    from ratchet_client import Client

    with Client(web.base_url, operator_credential=credential_issue(tenant_id="default").credential) as operator:
        run = operator.start_run("task")
        return AgentRun(run_id=run.run_id, token=operator.issue_token(run_id=run.run_id, agent="sdk-agent").token)


def effects(web: Web, run_id: str) -> dict[str, int]:
    """Writes per idempotency key in the workspace adapter's own journal."""
    workspace = web.workspace / run_id if (web.workspace / run_id).is_dir() else web.workspace
    return effects_by_key(workspace)


def grant(run_id: str) -> None:
    [item] = approvals_waiting(run_ids=[run_id])
    approval_grant(run_id=run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)


def agent_start(web: Web, run: AgentRun, model_url: str, state: Path) -> subprocess.Popen[str]:
    """The example agent (``agent.py``) as our own child process."""
    return subprocess.Popen([sys.executable, str(AGENT), "--ratchet", web.base_url, "--run", run.run_id,
                             "--model-url", model_url, "--state", str(state)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=child_env(RATCHET_GATEWAY_TOKEN=run.token))


def read_until(proc: subprocess.Popen[str], event: str, *, timeout: float = 120) -> list[dict[str, Any]]:
    """The child's JSON lines up to and including the first ``event`` (fails if it exits first)."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"the agent exited ({proc.wait()}) before {event}: {seen} {proc.stderr.read()}")
        seen += events(line)
        if seen and seen[-1].get("event") == event:
            return seen
    raise AssertionError(f"no {event} within {timeout} s: {seen}")


def kill(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL our own child (by its handle) and collect it."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=30)


def web_start_armed(port: int, specs: Path, point: str) -> subprocess.Popen[bytes]:
    """The web process as ``tests/gateway_clients/conftest.py`` starts it, armed to SIGKILL itself
    at crash point ``point`` (``name:hit``)."""
    env = child_env(RATCHET_API_TASK_SPECS_DIR=str(specs), RATCHET_PUBLIC_BASE_URL=PUBLIC,
                    RATCHET_LEASE_SECONDS="2", RATCHET_CRASH_AT=point)
    proc = subprocess.Popen([sys.executable, str(MANAGE), "runserver", f"127.0.0.1:{port}", "--noreload"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_listening(proc, port, what="the armed web process")
    return proc
