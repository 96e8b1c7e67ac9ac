"""An external workspace run for the gateway stories: the task spec, the adapter's own records."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from runtime.adapters.factory import open_adapter
from tests.helpers.procs import MANAGE, ROOT, child_env, wait_listening

EXTERNAL_ENTRY = "runtime.planners.external:ExternalPlanner"
"""The external planner by dotted path (works before ``pip install -e .`` registers ``external``)."""


def write_external_task(directory: Path, *, approval_risks: tuple[str, ...] = ("high",),
                        allowed_actions: tuple[str, ...] = ("write_file", "delete_file"),
                        allowed_paths: tuple[str, ...] = ("notes/**", "config/*.toml", "README.md"),
                        risk_paths: dict[str, str] | None = None, proposals: int = 50,
                        verifier: str = "always") -> Path:
    """A workspace task driven from outside (its workspace is ``directory/ws``); ``config/*.toml``
    writes are high risk unless ``risk_paths`` says otherwise."""
    directory = Path(directory)
    (directory / "ws").mkdir(parents=True, exist_ok=True)
    risks = risk_paths if risk_paths is not None else {"config/*.toml": "high"}
    lines = [
        "[task]", 'id = "gateway-story"', 'version = "1"', "",
        "[policy]", 'id = "gateway-policy"', 'version = "1"',
        "allowed_actions = [" + ", ".join(f'"{a}"' for a in allowed_actions) + "]",
        "allowed_paths = [" + ", ".join(f'"{p}"' for p in allowed_paths) + "]",
        "approval_risks = [" + ", ".join(f'"{r}"' for r in approval_risks) + "]", "",
        "[policy.budgets]", f"proposals = {proposals}", "steps = 200", "wall_seconds = 600", "cost_micros = 0", "",
        "[environment]", 'adapter = "workspace"', 'target = "ws"', "",
        "[planner]", 'kind = "python"', f'entry = "{EXTERNAL_ENTRY}"', "",
        "[planner.risks]", 'write_file = "low"', 'delete_file = "low"', "",
        "[planner.risk_paths]", *(f'"{k}" = "{v}"' for k, v in risks.items()), "",
        "[verifier]", f'kind = "{verifier}"', "",
    ]
    path = directory / "task.toml"
    path.write_text("\n".join(lines))
    return path


def effects_by_key(workspace: Path) -> dict[str, int]:
    """How many writes the workspace adapter's own journal records per idempotency key."""
    counts: dict[str, int] = {}
    for receipt in open_adapter("workspace", workspace).receipts():
        counts[receipt.idempotency_key] = counts.get(receipt.idempotency_key, 0) + 1
    return counts


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gateway_start(port: int, **env: str) -> subprocess.Popen[str]:
    """``manage.py gateway --port PORT`` on the test database, once it accepts connections; the lease
    is 1 s (a killed gateway's run is taken over quickly) unless ``env`` names another."""
    proc = subprocess.Popen([sys.executable, str(MANAGE), "gateway", "--port", str(port)], cwd=ROOT, text=True,
                            env=child_env(**{"RATCHET_LEASE_SECONDS": "1", **env}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_listening(proc, port, what="gateway")
    return proc


def gateway_stop(proc: subprocess.Popen[str]) -> None:
    """Kill our own gateway child (by its handle) and collect it."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=30)
