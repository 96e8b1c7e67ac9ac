"""Story: an OpenAI Agents SDK agent (the real ``openai-agents`` package, Chat Completions against
the fake model on loopback) writes files through Ratchet with ``ratchet_client.openai_agents``.

The Ratchet call id is the SDK's tool-call id; a write Ratchet holds for a human stops the SDK's
run with an interruption, and the human's decision in Ratchet resumes it (granted: executed once;
denied: the reason is the tool result). Real processes are killed with SIGKILL: the agent while it
waits for the approval and mid-call, the web process mid-call; the workspace adapter's own
journal and the run's receipts hold one effect per tool call (DESIGN.md sections 5.12 and 5.13).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner, RunResult
from django.db import connections
from openai import AsyncOpenAI
from ratchet_client import Client
from ratchet_client.openai_agents import RatchetTools

from runtime.decisions.denials import approval_deny
from runtime.models import ReviewCase, Run
from tests.gateway_clients.conftest import web_kill, web_start
from tests.gateway_clients.openai_agents.support import (
    agent_run,
    agent_start,
    effects,
    grant,
    kill,
    plan,
    read_until,
    web_start_armed,
    write,
)
from tests.helpers.procs import wait_for


def _agent(model_url: str, ratchet: RatchetTools) -> Agent:
    model = OpenAIChatCompletionsModel(model="fake", openai_client=AsyncOpenAI(base_url=model_url, api_key="x"))
    return Agent(name="notes", instructions="Keep the notes.", tools=ratchet.tools(), model=model)


def _deny(run_id: str, reason: str) -> None:
    """The human's denial, from the thread the event loop hands it to (its connection closed after)."""
    try:
        approval_deny(run_id=run_id, approver="olivia", reason=reason)
    finally:
        connections.close_all()


def _receipt_call_ids(web, run) -> list[str | None]:
    with Client(web.base_url, token=run.token) as client:
        return [r.call_id for r in client.receipts(run.run_id)]


def test_the_client_sdk_core_imports_nothing_of_the_agents_sdk() -> None:
    probe = ("import sys, ratchet_client; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('agents', 'openai', 'django')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin"}).stdout.strip()
    assert out == "[]", "the integration is an extra: only ratchet_client.openai_agents imports the SDK"


def test_an_agent_writes_through_ratchet_with_the_sdk_tool_call_ids(web, fake_model) -> None:
    model = fake_model(plan(("notes/a.txt", "a\n"), ("notes/b.txt", "b\n")))
    run = agent_run(web)
    ratchet = RatchetTools(web.base_url, token=run.token, run_id=run.run_id)
    agent = _agent(model.base_url, ratchet)
    names = [t.name for t in agent.tools]
    assert names == ["write_file", "delete_file", "finish", "read_file", "list_directory"]
    assert all("call_id" not in t.params_json_schema.get("properties", {}) for t in agent.tools)

    async def twice() -> tuple[RunResult, RunResult]:  # one event loop: the model's client lives in it
        return await Runner.run(agent, "Write the notes."), await Runner.run(agent, "Write the notes.")

    result, again = asyncio.run(twice())
    assert result.final_output == "All notes are written." and not result.interruptions
    assert _receipt_call_ids(web, run) == ["call_0", "call_1"]  # the fake model's tool-call ids
    assert Run.objects.get(run_id=run.run_id).phase == "completed"
    outputs = [json.loads(i.output) for i in result.new_items if i.type == "tool_call_output_item"]
    assert [o["status"] for o in outputs] == ["executed", "executed", "finished"]

    # The same conversation again: the model repeats its tool-call ids, Ratchet its receipts.
    assert [json.loads(i.output)["call_id"] for i in again.new_items if i.type == "tool_call_output_item"][:2] \
        == ["call_0", "call_1"]
    assert sorted(effects(web, run.run_id).values()) == [1, 1], "a repeated tool-call id has no second effect"


def test_the_agent_reads_what_it_wrote(web, fake_model) -> None:
    model = fake_model([write("notes/a.txt", "alpha\n"), {"tool": "read_file", "arguments": {"path": "notes/a.txt"}},
                        {"tool": "list_directory", "arguments": {"path": "notes"}}, {"content": "read"}])
    run = agent_run(web)
    agent = _agent(model.base_url, RatchetTools(web.base_url, token=run.token, run_id=run.run_id))
    result = asyncio.run(Runner.run(agent, "Write and read."))
    _, read, listed = (i.output for i in result.new_items if i.type == "tool_call_output_item")
    assert read == "alpha\n"
    assert json.loads(listed) == [{"path": "notes/a.txt", "kind": "file"}]


def test_a_denied_write_gives_the_reason_to_the_model_and_executes_nothing(web, fake_model) -> None:
    model = fake_model([write("config/limits.toml", "max = 3\n"), {"content": "Understood."}])
    run = agent_run(web)
    ratchet = RatchetTools(web.base_url, token=run.token, run_id=run.run_id, poll_seconds=0.1)
    agent = _agent(model.base_url, ratchet)

    async def story() -> RunResult:
        paused = await Runner.run(agent, "Raise the limit.")
        assert [(i.tool_name, i.call_id) for i in paused.interruptions] == [("write_file", "call_0")]
        await asyncio.to_thread(_deny, run.run_id, "the limit stays at 5")
        return await Runner.run(agent, await ratchet.settle(paused))

    result = asyncio.run(story())
    [output] = [i.output for i in result.new_items if i.type == "tool_call_output_item"]
    assert "the limit stays at 5" in output and output.startswith("Ratchet did not execute this call")
    assert result.final_output == "Understood."
    assert effects(web, run.run_id) == {} and not (web.workspace / "config" / "limits.toml").exists()


def test_an_approval_pauses_the_agent_which_is_killed_and_resumes_from_its_saved_state(web, fake_model,
                                                                                       tmp_path) -> None:
    model = fake_model(plan(("notes/a.txt", "a\n"), ("config/limits.toml", "max = 3\n"), ("notes/b.txt", "b\n")))
    run = agent_run(web)
    state = tmp_path / "agent-state.json"
    agent = agent_start(web, run, model.base_url, state)
    try:
        paused = read_until(agent, "paused")[-1]
        assert paused["call_ids"] == ["call_1"] and state.is_file()
    finally:
        kill(agent)  # SIGKILL while it waits for the human
    with Client(web.base_url, token=run.token) as client:
        pending = client.pending_approval(run.run_id)
    assert pending.waiting and pending.call_id == "call_1" and pending.approval_url.startswith("https://")

    grant(run.run_id)
    again = agent_start(web, run, model.base_url, state)
    try:
        seen = read_until(again, "done")
    finally:
        kill(again)
    assert seen[0]["event"] == "resumed"
    assert _receipt_call_ids(web, run) == ["call_0", "call_1", "call_2"]
    assert sorted(effects(web, run.run_id).values()) == [1, 1, 1]
    assert (web.workspace / "config" / "limits.toml").read_text() == "max = 3\n"
    assert model.requests_per_step() == {0: 1, 1: 1, 2: 1, 3: 1, 4: 1}, "resumed from the state: nothing re-asked"
    assert Run.objects.get(run_id=run.run_id).phase == "completed"


def test_the_web_process_and_the_agent_killed_mid_call_leave_one_effect_per_tool_call(web, fake_model,
                                                                                      tmp_path) -> None:
    model = fake_model(plan(("notes/a.txt", "a\n"), ("notes/b.txt", "b\n"), ("notes/c.txt", "c\n")))
    run = agent_run(web)
    web_kill(web.proc)
    web.proc = web_start_armed(web.port, web.specs, "engine.after_execute:2")  # dies after call_1's write
    agent = agent_start(web, run, model.base_url, tmp_path / "agent-state.json")
    try:
        web.proc.wait(timeout=120)
        assert web.proc.returncode == -9
        wait_for(lambda: (web.workspace / "notes" / "b.txt").exists(), what="call_1's write")
    finally:
        kill(agent)  # SIGKILL while its call_1 has no answer
    web_kill(web.proc)
    web.proc = web_start(web.port, web.specs)

    again = agent_start(web, run, model.base_url, tmp_path / "agent-state.json")
    try:
        done = read_until(again, "done")[-1]
    finally:
        kill(again)
    assert [json.loads(o)["call_id"] for o in done["tool_outputs"]] == ["call_0", "call_1", "call_2", "call_3"]
    assert _receipt_call_ids(web, run) == ["call_0", "call_1", "call_2"]
    assert sorted(effects(web, run.run_id).values()) == [1, 1, 1], "one effect per tool call across both kills"
    assert Run.objects.get(run_id=run.run_id).phase == "completed"
    assert not ReviewCase.objects.filter(run_id=run.run_id).exists()
