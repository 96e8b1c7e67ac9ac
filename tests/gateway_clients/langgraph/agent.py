"""A LangGraph agent (``create_react_agent``, a real ``ChatOpenAI`` model, a SQLite checkpointer)
whose tools are Ratchet's (``ratchet_client.langgraph``), as a process the crash stories kill.

Usage::

    RATCHET_GATEWAY_TOKEN=rgw_... python tests/gateway_clients/langgraph/agent.py \\
        --ratchet http://127.0.0.1:8000 --run RUN_ID --model http://127.0.0.1:PORT/v1 \\
        --db graph.sqlite [--die-after-tool N] [--retry-seconds S]

Started again with the same ``--db`` it continues the thread from its last checkpoint: a
pending tool node runs again with the tool-call ids the checkpoint holds, a pending approval is
resumed. ``--die-after-tool N`` SIGKILLs this process right after the N-th tool call returned
from Ratchet, before LangGraph checkpointed its result (the window where a framework that
invents ids on a retry would write twice). ``--retry-seconds`` is how long a call without an
answer is repeated before the tool raises and the process exits. Prints one JSON line per tool message, then
``{"outcome": "done"|"interrupted", ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import sys
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.prebuilt import create_react_agent
from langgraph.types import Command
from ratchet_client import Client
from ratchet_client.langgraph import ratchet_tools

SYSTEM = "You keep notes through Ratchet's tools. Write what the user asks, then call finish."
TASK = "Write the two notes, then finish."


class DieAfterTool(BaseCallbackHandler):
    """SIGKILL this process when the ``n``-th tool call ends (its answer is not yet checkpointed)."""

    def __init__(self, n: int) -> None:
        self.n, self.seen = n, 0

    def on_tool_end(self, output: Any, **kwargs: Any) -> None:
        self.seen += 1
        if self.seen == self.n:
            print(json.dumps({"dying_after_tool": self.seen}), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


def build_agent(*, ratchet: Client, run_id: str, model_url: str, db: str, retry_seconds: float) -> Any:
    model = ChatOpenAI(model="fake-model", base_url=model_url, api_key="not-a-key", max_retries=0)
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    tools = ratchet_tools(ratchet, run_id, retry_seconds=retry_seconds)
    return create_react_agent(model, tools, prompt=SYSTEM, checkpointer=saver)


def next_input(agent: Any, config: dict[str, Any]) -> Any:
    """What continues the thread: resume a pause, finish an interrupted step, or start."""
    state = agent.get_state(config)
    if state.interrupts:
        return Command(resume="approved")
    if state.next:
        return None  # a step the last process did not finish: run it again from the checkpoint
    return {"messages": [("user", TASK)]}


def _parsed(content: Any) -> Any:
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return content  # a read's text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ratchet", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--die-after-tool", type=int, default=0)
    parser.add_argument("--retry-seconds", type=float, default=60.0)
    args = parser.parse_args()
    config: dict[str, Any] = {"configurable": {"thread_id": args.run}, "recursion_limit": 30}
    if args.die_after_tool:
        config["callbacks"] = [DieAfterTool(args.die_after_tool)]
    with Client(args.ratchet, token=os.environ["RATCHET_GATEWAY_TOKEN"]) as ratchet:
        agent = build_agent(ratchet=ratchet, run_id=args.run, model_url=args.model, db=args.db,
                            retry_seconds=args.retry_seconds)
        result = agent.invoke(next_input(agent, config), config)
    for message in result["messages"]:
        if isinstance(message, ToolMessage):
            print(json.dumps({"tool_call_id": message.tool_call_id, "content": _parsed(message.content)}),
                  flush=True)
    if result.get("__interrupt__"):
        print(json.dumps({"outcome": "interrupted", "value": result["__interrupt__"][0].value}), flush=True)
    else:
        print(json.dumps({"outcome": "done", "answer": result["messages"][-1].content}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
