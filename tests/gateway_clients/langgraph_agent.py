"""A LangGraph agent loop whose tool node calls Ratchet's gateway (JSON API) instead of acting itself.

There is no language model here: the ``model`` node is scripted and deterministic -- it proposes
the next tool call of a fixed plan, or ends -- which is all the loop needs to show the shape:
model -> tools -> model ..., where the tools node sends each call with its own call id to
``POST /api/v1/runs/<run id>/calls`` and hands the gateway's answer back as the tool message.
A crashed loop started again repeats its call ids and gets the original receipts.

Usage::

    RATCHET_GATEWAY_TOKEN=rgw_... python tests/gateway_clients/langgraph_agent.py \\
        --api http://127.0.0.1:8000/api/v1 --run RUN_ID
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import sys
from typing import Annotated, Any, TypedDict

import httpx
from langgraph.graph import END, START, StateGraph

PLAN: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"path": "notes/plan.txt", "content": "1. write the plan\n2. write the summary\n"}),
    ("write_file", {"path": "notes/summary.txt", "content": "done by a LangGraph loop\n"}),
    ("finish", {"summary": "plan and summary written"}),
]


class LoopState(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]


def scripted_model(state: LoopState) -> dict[str, Any]:
    """The deterministic stand-in for a model: the next planned tool call, or a final answer."""
    done = sum(1 for m in state["messages"] if m["role"] == "tool" and not m["content"].get("error"))
    if done >= len(PLAN):
        return {"messages": [{"role": "assistant", "content": "finished"}]}
    name, arguments = PLAN[done]
    return {"messages": [{"role": "assistant", "tool_call": {"id": f"step-{done}", "name": name,
                                                             "arguments": arguments}}]}


def build_graph(*, http: httpx.Client, run_id: str, token: str) -> Any:
    """The compiled loop; ``http`` reaches the gateway's JSON API (its base URL is ``/api/v1``)."""

    def tools(state: LoopState) -> dict[str, Any]:
        call = state["messages"][-1]["tool_call"]
        response = http.post(f"/runs/{run_id}/calls", headers={"Authorization": f"Bearer {token}"},
                             json={"call_id": call["id"], "tool": call["name"], "arguments": call["arguments"]})
        body = response.json()
        if "error" in body and not body["error"].get("retryable"):
            raise RuntimeError(f"the gateway refused {call['id']}: {body['error']['code']}")
        return {"messages": [{"role": "tool", "tool_call_id": call["id"], "content": body}]}

    def route(state: LoopState) -> str:
        return "tools" if "tool_call" in state["messages"][-1] else END

    graph = StateGraph(LoopState)
    graph.add_node("model", scripted_model)
    graph.add_node("tools", tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, {"tools": "tools", END: END})
    graph.add_edge("tools", "model")
    return graph.compile()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", default="http://127.0.0.1:8000/api/v1")
    parser.add_argument("--run", required=True)
    args = parser.parse_args()
    token = os.environ.get("RATCHET_GATEWAY_TOKEN", "")
    if not token:
        print("set RATCHET_GATEWAY_TOKEN", file=sys.stderr)
        return 2
    with httpx.Client(base_url=args.api, timeout=60) as http:
        final = build_graph(http=http, run_id=args.run, token=token).invoke({"messages": []},
                                                                            {"recursion_limit": 50})
    for message in final["messages"]:
        print(json.dumps(message, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
