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
import threading
from typing import Any

import httpx
from agents import Agent, FunctionTool, OpenAIChatCompletionsModel, Runner, RunResult, function_tool
from agents.tool_context import ToolContext
from django.db import connections
from openai import AsyncOpenAI
from ratchet_client import AsyncClient, Client
from ratchet_client.call_ids import ratchet_call_id
from ratchet_client.openai_agents import CALL_ID_PREFIX, DENIED, RatchetTools

from runtime.decisions.denials import approval_deny
from runtime.gateway.tools import CALL_ID as SERVER_CALL_ID
from runtime.models import ReviewCase, Run
from tests.gateway_clients.conftest import agent_run, effects, web_kill, web_start
from tests.gateway_clients.openai_agents.support import agent_start, grant, plan, read_until, write
from tests.helpers.procs import wait_for


def _agent(model_url: str, ratchet: RatchetTools, *others: FunctionTool) -> Agent:
    model = OpenAIChatCompletionsModel(model="fake", openai_client=AsyncOpenAI(base_url=model_url, api_key="x"))
    return Agent(name="notes", instructions="Keep the notes.", tools=[*ratchet.tools(), *others], model=model)


def _deny(run_id: str, reason: str, mode: str = "stop") -> None:
    """The human's denial, from a thread off the event loop (its connection closed after)."""
    try:
        approval_deny(run_id=run_id, approver="olivia", reason=reason, mode=mode)
    finally:
        connections.close_all()


def _outputs(result: RunResult) -> list[Any]:
    return [i.output for i in result.new_items if i.type == "tool_call_output_item"]


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
        web_kill(agent.proc)  # SIGKILL while it waits for the human
    with Client(web.base_url, token=run.token) as client:
        pending = client.pending_approval(run.run_id)
    assert pending.waiting and pending.call_id == "call_1" and pending.approval_url.startswith("https://")

    grant(run.run_id)
    again = agent_start(web, run, model.base_url, state)
    try:
        seen = read_until(again, "done")
    finally:
        web_kill(again.proc)
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
    web.proc = web_start(web.port, web.specs, RATCHET_CRASH_AT="engine.after_execute:2")  # dies after call_1's write
    agent = agent_start(web, run, model.base_url, tmp_path / "agent-state.json")
    try:
        web.proc.wait(timeout=120)
        assert web.proc.returncode == -9
        wait_for(lambda: (web.workspace / "notes" / "b.txt").exists(), what="call_1's write")
    finally:
        web_kill(agent.proc)  # SIGKILL while its call_1 has no answer
    web_kill(web.proc)
    web.proc = web_start(web.port, web.specs)

    again = agent_start(web, run, model.base_url, tmp_path / "agent-state.json")
    try:
        done = read_until(again, "done")[-1]
    finally:
        web_kill(again.proc)
    assert [json.loads(o)["call_id"] for o in done["tool_outputs"]] == ["call_0", "call_1", "call_2", "call_3"]
    assert _receipt_call_ids(web, run) == ["call_0", "call_1", "call_2"]
    assert sorted(effects(web, run.run_id).values()) == [1, 1, 1], "one effect per tool call across both kills"
    assert Run.objects.get(run_id=run.run_id).phase == "completed"
    assert not ReviewCase.objects.filter(run_id=run.run_id).exists()


def _bell_story(web, fake_model) -> tuple[Any, Any, RatchetTools, Agent]:  # type: ignore[no-untyped-def]
    """``(model, run, ratchet, agent)``: an agent whose model calls ``ring_bell``, a tool of the
    caller's own that needs approval (not Ratchet's), then answers "Rang."."""
    model = fake_model([{"tool": "ring_bell", "arguments": {"room": "lab"}}, {"content": "Rang."}])
    run = agent_run(web)
    ratchet = RatchetTools(web.base_url, token=run.token, run_id=run.run_id, poll_seconds=0.1)

    @function_tool(needs_approval=True)
    def ring_bell(room: str) -> str:
        """Ring the bell of a room (not a Ratchet tool: the caller approves it)."""
        return f"rang {room}"

    return model, run, ratchet, _agent(model.base_url, ratchet, ring_bell)


def test_another_tools_approval_is_left_to_the_caller_instead_of_running_again(web, fake_model, tmp_path) -> None:
    model, run, ratchet, agent = _bell_story(web, fake_model)
    state_file = tmp_path / "state.json"

    async def story() -> tuple[RunResult, RunResult]:
        paused = await asyncio.wait_for(ratchet.run(agent, "Ring the bell.", state_file=state_file), timeout=120)
        [item] = paused.interruptions
        assert item.tool_name == "ring_bell" and state_file.is_file()
        state = paused.to_state()
        state.approve(item)  # the caller's own decision
        return paused, await asyncio.wait_for(ratchet.run(agent, state), timeout=120)

    paused, done = asyncio.run(story())
    assert model.requests_per_step() == {0: 1, 1: 1}, "returned at the interruption: the model was not asked again"
    assert _outputs(done) == ["rang lab"] and done.final_output == "Rang."
    assert effects(web, run.run_id) == {}


def test_the_tutorials_hand_written_loop_hands_another_tools_approval_to_the_caller(web, fake_model) -> None:
    model, run, ratchet, agent = _bell_story(web, fake_model)

    async def story() -> RunResult:
        # The loop of runtime/docs/tutorials/openai-agents.md, "Without the helper: the SDK's own loop".
        result = await Runner.run(agent, "Ring the bell.")
        while result.interruptions:
            state = await ratchet.settle(result)
            yours = [item for item in state.get_interruptions() if item.tool_name not in ratchet.write_tools]
            if yours:
                break
            result = await Runner.run(agent, state)
        [item] = yours
        state.approve(item)  # the caller's own decision, then the resume
        return await Runner.run(agent, state)

    done = asyncio.run(asyncio.wait_for(story(), timeout=120))
    assert _outputs(done) == ["rang lab"] and done.final_output == "Rang."
    assert model.requests_per_step() == {0: 1, 1: 1}, "the loop stopped at the interruption instead of spinning"
    assert effects(web, run.run_id) == {}


def test_a_continue_denial_gives_the_reason_to_the_model_and_the_run_goes_on(web, fake_model) -> None:
    note = ("notes/ask-finance.txt", "please raise max to 3\n")
    model = fake_model([write("config/limits.toml", "max = 3\n"), write(*note), {"content": "Asked finance."}])
    run = agent_run(web)
    ratchet = RatchetTools(web.base_url, token=run.token, run_id=run.run_id, poll_seconds=0.1)
    agent = _agent(model.base_url, ratchet)
    deciders: list[threading.Thread] = []

    def on_pause(items: list) -> None:  # the human decides while settle() waits
        assert [i.call_id for i in items] == ["call_0"]
        deciders.append(threading.Thread(target=_deny, args=(run.run_id, "limits are owned by finance",
                                                                 "continue")))
        deciders[-1].start()

    result = asyncio.run(asyncio.wait_for(ratchet.run(agent, "Raise the limit.", on_pause=on_pause), timeout=180))
    for decider in deciders:
        decider.join(timeout=60)
    denied, wrote = _outputs(result)
    assert denied.startswith(DENIED) and "denied by olivia: limits are owned by finance" in denied
    assert json.loads(wrote)["status"] == "executed" and json.loads(wrote)["call_id"] == "call_1"
    assert result.final_output == "Asked finance." and len(deciders) == 1
    assert _receipt_call_ids(web, run) == ["call_1"]
    assert not (web.workspace / "config" / "limits.toml").exists()
    assert Run.objects.get(run_id=run.run_id).phase == "running", "the denial let the run go on"


def _invoke(tool: FunctionTool, tool_call_id: str, arguments: dict) -> str:
    raw = json.dumps(arguments)
    ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id=tool_call_id, tool_arguments=raw)
    return asyncio.run(tool.on_invoke_tool(ctx, raw))


def test_a_tool_call_id_the_gateway_would_refuse_becomes_a_stable_call_id(web) -> None:
    run = agent_run(web)
    ratchet = RatchetTools(web.base_url, token=run.token, run_id=run.run_id)
    [write_file] = [t for t in ratchet.tools() if t.name == "write_file"]
    long_id = "call_" + "Z9" * 40 + " from a provider"
    arguments = {"path": "notes/long.txt", "content": "long id\n"}

    first = json.loads(_invoke(write_file, long_id, arguments))
    again = json.loads(_invoke(write_file, long_id, arguments))
    expected = ratchet_call_id(long_id, prefix=CALL_ID_PREFIX)
    assert first["status"] == "executed" and first["call_id"] == expected == again["call_id"]
    assert expected.startswith("oa-") and SERVER_CALL_ID.match(expected)
    assert again["receipt"] == first["receipt"]
    assert _receipt_call_ids(web, run) == [expected]
    assert list(effects(web, run.run_id).values()) == [1]


class _CountingTools(RatchetTools):
    """RatchetTools whose HTTP client counts the calls it submits (the requests still go to the server)."""

    submitted: list[str]

    def _client(self) -> AsyncClient:
        async def count(request: httpx.Request) -> None:
            if request.method == "POST" and request.url.path.endswith("/calls"):
                self.submitted.append(json.loads(request.content)["call_id"])

        return AsyncClient(self.base_url, token=self._token,
                           http=httpx.AsyncClient(timeout=30, event_hooks={"request": [count]}))


def test_a_refusal_met_while_asking_for_approval_is_the_result_without_a_second_submit(web, fake_model) -> None:
    model = fake_model([write("elsewhere/x.txt", "x\n"), {"content": "Not allowed."}])
    run = agent_run(web)
    ratchet = _CountingTools(web.base_url, token=run.token, run_id=run.run_id)
    ratchet.submitted = []
    result = asyncio.run(Runner.run(_agent(model.base_url, ratchet), "Write elsewhere."))
    [refused] = [json.loads(o) for o in _outputs(result)]
    assert refused["error"]["code"] == "policy_refused" and not refused["error"]["retryable"]
    assert ratchet.submitted == ["call_0"], "needs_approval submitted it once; the invocation kept the refusal"
    assert effects(web, run.run_id) == {}
