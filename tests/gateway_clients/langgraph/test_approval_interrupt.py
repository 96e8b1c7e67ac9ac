"""Story: a LangGraph agent (``create_react_agent``, ``ChatOpenAI`` against the fake model, a SQLite
checkpointer) writes through Ratchet's tools; a write that needs an approval pauses the graph
with ``interrupt()``, and ``Command(resume=...)`` after the approval writes it once; a denial's
reason is the tool's result (DESIGN.md section 5.12)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.prebuilt import create_react_agent
from langgraph.types import Command
from ratchet_client import Client
from ratchet_client.langgraph import ratchet_tools

from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.decisions.denials import approval_deny
from tests.gateway_clients.conftest import PUBLIC, agent_run, effects

RISKY = {"path": "config/limits.toml", "content": "max = 3\n"}
NOTE = {"path": "notes/why.txt", "content": "limits for the nightly job\n"}
SCRIPT = [
    {"tool": "write_file", "arguments": NOTE},
    {"tool": "read_file", "arguments": {"path": NOTE["path"]}},
    {"tool": "list_directory", "arguments": {"path": "notes"}},
    {"tool": "write_file", "arguments": RISKY},
    {"finish": "note and limits written"},
    {"content": "done"},
]


def _agent(web, fake_model, saver: Any) -> tuple[Any, Client, str, dict[str, Any]]:
    run = agent_run(web, agent="langgraph")
    run_id = run.run_id
    ratchet = Client(web.base_url, token=run.token)
    model = ChatOpenAI(model="fake-model", base_url=fake_model(SCRIPT).base_url, api_key="not-a-key", max_retries=0)
    agent = create_react_agent(model, ratchet_tools(ratchet, run_id), prompt="Keep notes.", checkpointer=saver)
    return agent, ratchet, run_id, {"configurable": {"thread_id": run_id}}


def _tool_answers(result: dict[str, Any]) -> list[Any]:
    return [m.content if m.name == "read_file" else json.loads(m.content)
            for m in result["messages"] if isinstance(m, ToolMessage)]


def test_an_approval_pauses_the_graph_and_the_resumed_graph_writes_once(web, fake_model, tmp_path) -> None:
    saver = SqliteSaver(sqlite3.connect(tmp_path / "graph.sqlite", check_same_thread=False))
    agent, ratchet, run_id, config = _agent(web, fake_model, saver)

    paused = agent.invoke({"messages": [("user", "Write the note and the limits.")]}, config)
    [pause] = paused["__interrupt__"]
    assert pause.value["approval_url"] == f"{PUBLIC}/runs/{run_id}/"
    assert pause.value["tool"] == "write_file" and pause.value["arguments"] == RISKY
    assert pause.value["pending"]["target"] == "config/limits.toml" and pause.value["call_id"] == "call_3"
    assert not (web.workspace / "config/limits.toml").exists()

    again = agent.invoke(Command(resume="approved?"), config)  # resumed before anyone approved
    assert again["__interrupt__"][0].value["call_id"] == "call_3"

    [item] = approvals_waiting(run_ids=[run_id])
    approval_grant(run_id=run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)
    done = agent.invoke(Command(resume="approved"), config)

    assert "__interrupt__" not in done and done["messages"][-1].content == "done"
    note, read, listing, risky, finish = _tool_answers(done)
    assert read == NOTE["content"] and listing == [NOTE["path"]], "the reads see the run's directory"
    assert [a["status"] for a in (note, risky, finish)] == ["executed", "executed", "finished"]
    calls = [c["id"] for m in done["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert calls == ["call_0", "call_1", "call_2", "call_3", "call_4"]
    assert [a["call_id"] for a in (note, risky, finish)] == ["call_0", "call_3", "call_4"]
    assert (web.workspace / "config/limits.toml").read_text() == RISKY["content"]
    assert [r.call_id for r in ratchet.receipts(run_id)] == ["call_0", "call_3"]
    assert sorted(effects(web, run_id).values()) == [1, 1]
    assert ratchet.run(run_id).phase == "completed"


def test_a_denial_comes_back_to_the_model_as_the_tool_result_in_an_async_graph(web, fake_model) -> None:
    agent, ratchet, run_id, config = _agent(web, fake_model, InMemorySaver())
    loop = asyncio.new_event_loop()  # one loop: the model's async HTTP client outlives a call
    try:
        paused = loop.run_until_complete(agent.ainvoke({"messages": [("user", "Write the note and the limits.")]},
                                                       config))
        assert paused["__interrupt__"][0].value["arguments"] == RISKY

        approval_deny(run_id=run_id, approver="olivia", reason="limits are frozen this week")
        done = loop.run_until_complete(agent.ainvoke(Command(resume="denied"), config))
    finally:
        loop.close()

    denied = _tool_answers(done)[3]
    assert denied["error"] == "approval_denied" and "limits are frozen this week" in denied["message"]
    assert not (web.workspace / "config/limits.toml").exists()
    assert sorted(effects(web, run_id).values()) == [1]
