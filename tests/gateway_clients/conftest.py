"""A live web process (``manage.py runserver``, a real child on the test database) for the clients,
a run and its gateway token, and the effects the workspace adapter journaled."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ratchet_client import Client

from runtime.gateway.operator_credentials import credential_issue
from tests.gateway.support import effects_by_key, free_port, write_external_task
from tests.helpers.procs import MANAGE, ROOT, child_env, wait_listening

PUBLIC = "https://ratchet.example.test"
"""The public base URL the web process is told it is reached at (links only; nothing dials it)."""


@dataclass
class Web:
    base_url: str
    specs: Path
    """The folder of task specs the operator API starts runs from (``task`` is an external run)."""
    proc: subprocess.Popen[bytes]
    port: int

    @property
    def workspace(self) -> Path:
        return self.specs / "ws"


def web_start(port: int, specs: Path, **extra: str) -> subprocess.Popen[bytes]:
    """``manage.py runserver`` on ``port`` once it accepts connections (our own child); ``extra``
    adds to its environment (e.g. ``RATCHET_CRASH_AT``)."""
    env = child_env(RATCHET_API_TASK_SPECS_DIR=str(specs), RATCHET_PUBLIC_BASE_URL=PUBLIC,
                    RATCHET_LEASE_SECONDS="2", **extra)
    proc = subprocess.Popen([sys.executable, str(MANAGE), "runserver", f"127.0.0.1:{port}", "--noreload"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_listening(proc, port, what="the web process")
    return proc


def web_kill(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL our own child (the web process, or an agent process; by its handle) and collect it."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=30)


@pytest.fixture
def web(tmp_path: Path, ratchet_keys, transactional_db) -> Iterator[Web]:
    write_external_task(tmp_path)
    port = free_port()
    live = Web(base_url=f"http://127.0.0.1:{port}", specs=tmp_path, proc=web_start(port, tmp_path), port=port)
    try:
        yield live
    finally:
        web_kill(live.proc)


@dataclass
class AgentRun:
    """A run started through the operator API and a gateway token for it."""

    run_id: str
    token: str


def agent_run(web: Web, *, agent: str = "sdk-agent") -> AgentRun:
    """Start a run of the ``task`` spec as an operator and issue ``agent`` a token for it."""
    with Client(web.base_url, operator_credential=credential_issue(tenant_id="default").credential) as operator:
        run = operator.start_run("task")
        return AgentRun(run_id=run.run_id, token=operator.issue_token(run_id=run.run_id, agent=agent).token)


def effects(web: Web, run_id: str) -> dict[str, int]:
    """Writes per idempotency key in the workspace adapter's own journal."""
    workspace = web.workspace / run_id if (web.workspace / run_id).is_dir() else web.workspace
    return effects_by_key(workspace)
