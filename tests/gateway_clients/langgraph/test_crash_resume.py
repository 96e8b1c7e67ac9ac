"""Story: a LangGraph agent process and the web process are SIGKILLed mid-call; the agent resumes
from its SQLite checkpoint with the tool-call ids it persisted, and every tool call has exactly
one effect (the workspace, the adapter's journal and Ratchet's receipts agree; DESIGN.md
section 5.12).

Real processes: ``tests/gateway_clients/langgraph/agent.py`` (``create_react_agent`` with a
``ChatOpenAI`` model against the fake model server) and ``manage.py runserver``. The agent kills
itself right after its first write returned from Ratchet, before LangGraph checkpointed the
answer; the web process is killed at an engine crash point after the second write's effect and
before its receipt was recorded (``RATCHET_CRASH_AT``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ratchet_client import Client

from tests.gateway.support import free_port
from tests.gateway_clients.conftest import agent_run, effects, web_kill, web_start
from tests.helpers.procs import ROOT, child_env, events

AGENT = ROOT / "tests" / "gateway_clients" / "langgraph" / "agent.py"
NOTES = {"notes/a.txt": "first note\n", "notes/b.txt": "second note\n"}
SCRIPT = [
    *({"tool": "write_file", "arguments": {"path": path, "content": content}} for path, content in NOTES.items()),
    {"finish": "two notes written"},
    {"content": "done"},
]


def _agent(base_url: str, run_id: str, token: str, model_url: str, db: Path,
           *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(AGENT), "--ratchet", base_url, "--run", run_id, "--model", model_url,
                           "--db", str(db), *extra], cwd=ROOT, text=True, capture_output=True, timeout=240,
                          env=child_env(RATCHET_GATEWAY_TOKEN=token))


def test_a_killed_agent_and_a_killed_web_process_resume_with_one_effect_per_tool_call(
        web, fake_model, tmp_path) -> None:
    model = fake_model(SCRIPT)
    run = agent_run(web, agent="langgraph")
    run_id, token = run.run_id, run.token
    db = tmp_path / "graph.sqlite"

    # 1. The agent dies right after Ratchet executed call_0, before its checkpoint has the answer.
    killed = _agent(web.base_url, run_id, token, model.base_url, db, "--die-after-tool", "1")
    assert killed.returncode == -9, killed.stderr
    assert (web.workspace / "notes/a.txt").read_text() == NOTES["notes/a.txt"]

    # 2. The web process dies inside call_1: the file is written, the receipt not yet recorded.
    # call_0's repeat is answered from the ledger without executing: the first execution in this
    # process is call_1's.
    web_kill(web.proc)
    port = free_port()
    doomed = web_start(port, web.specs, RATCHET_CRASH_AT="engine.after_execute:1")
    base_url = f"http://127.0.0.1:{port}"
    try:
        broken = _agent(base_url, run_id, token, model.base_url, db, "--retry-seconds", "2")
        doomed.wait(timeout=60)
        assert doomed.returncode == -9, doomed.stderr.read() if doomed.stderr else ""
        assert broken.returncode != 0 and "transport_error" in broken.stderr, broken.stderr
    finally:
        web_kill(doomed)

    # 3. A new web process and the agent once more, from its checkpoint.
    port = free_port()
    web.proc = web_start(port, web.specs)
    final = _agent(f"http://127.0.0.1:{port}", run_id, token, model.base_url, db)
    assert final.returncode == 0, final.stderr
    lines = events(final.stdout)
    assert lines[-1] == {"outcome": "done", "answer": "done"}
    answers = [line for line in lines if "tool_call_id" in line]
    assert [a["tool_call_id"] for a in answers] == [a["content"]["call_id"] for a in answers] == [
        "call_0", "call_1", "call_2"]
    assert answers[0]["content"]["repeated"], "call_0 ran again from the checkpoint and got its receipt"
    assert model.requests_per_step() == {0: 1, 1: 1, 2: 1, 3: 1}, "each tool call id came from the checkpoint"

    for path, content in NOTES.items():
        assert (web.workspace / path).read_text() == content
    receipts = Client(f"http://127.0.0.1:{port}", token=token).receipts(run_id)
    assert [r.call_id for r in receipts] == ["call_0", "call_1"]
    assert effects(web, run_id) == {r.idempotency_key: 1 for r in receipts}
