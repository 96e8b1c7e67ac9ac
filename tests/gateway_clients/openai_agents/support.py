"""What the OpenAI Agents SDK stories share: the fake model's scripts, the human's decision, and
the agent script as a child process whose JSON lines are read with a deadline."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.decisions.approvals import approval_grant, approvals_waiting
from tests.gateway_clients.conftest import AgentRun, Web
from tests.helpers.procs import ROOT, child_env, events

AGENT = Path(__file__).with_name("agent.py")


def write(path: str, content: str) -> dict[str, Any]:
    """A scripted model turn: one ``write_file`` tool call."""
    return {"tool": "write_file", "arguments": {"path": path, "content": content}}


def plan(*writes: tuple[str, str]) -> list[Any]:
    """The fake model's steps: each write, then ``finish``, then a final answer (no more tools)."""
    return [write(p, c) for p, c in writes] + [{"finish": "notes written"}, {"content": "All notes are written."}]


def grant(run_id: str) -> None:
    [item] = approvals_waiting(run_ids=[run_id])
    approval_grant(run_id=run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)


@dataclass
class AgentProcess:
    """The agent script as our own child, and its stdout lines as a thread reads them (so a
    reader can give up at a deadline instead of blocking on ``readline``)."""

    proc: subprocess.Popen[str]
    lines: queue.Queue[str] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        try:
            for line in self.proc.stdout or ():
                self.lines.put(line)
        except ValueError:
            pass  # the pipe was closed when the child was collected
        self.lines.put("")  # end of output


def agent_start(web: Web, run: AgentRun, model_url: str, state: Path) -> AgentProcess:
    """The example agent (``agent.py``) as our own child process."""
    return AgentProcess(subprocess.Popen(
        [sys.executable, str(AGENT), "--ratchet", web.base_url, "--run", run.run_id, "--model-url", model_url,
         "--state", str(state)], cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=child_env(RATCHET_GATEWAY_TOKEN=run.token)))


def read_until(agent: AgentProcess, event: str, *, timeout: float = 120) -> list[dict[str, Any]]:
    """The child's JSON lines up to and including the first ``event``; fails if the child exits
    first or ``timeout`` seconds pass without it."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = agent.lines.get(timeout=left)
        except queue.Empty:
            break
        if not line:
            stderr = agent.proc.stderr.read() if agent.proc.stderr else ""
            raise AssertionError(f"the agent exited ({agent.proc.wait()}) before {event}: {seen} {stderr}")
        seen += events(line)
        if seen and seen[-1].get("event") == event:
            return seen
    raise AssertionError(f"no {event} within {timeout} s: {seen}")
