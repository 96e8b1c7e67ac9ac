"""An OpenAI Agents SDK agent whose writes go through Ratchet (``ratchet_client.openai_agents``).

The model is any OpenAI-compatible Chat Completions server (the tests use the fake model on
loopback). When Ratchet holds a write for a human, the SDK's run stops with an interruption: this
script (``RatchetTools.run``) saves the ``RunState`` to ``--state`` and waits for the decision;
killed and started again, it resumes from that file instead of starting over, so no tool call is
asked for twice.

Usage::

    RATCHET_GATEWAY_TOKEN=rgw_... python tests/gateway_clients/openai_agents/agent.py \\
        --ratchet http://127.0.0.1:8000 --run RUN_ID --model-url http://127.0.0.1:PORT/v1 \\
        --state agent-state.json "Write the notes"

It prints one JSON line per event (``paused`` with the approval link, ``resumed``, ``done``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from agents import Agent, OpenAIChatCompletionsModel, set_tracing_disabled
from openai import AsyncOpenAI
from ratchet_client.openai_agents import RatchetTools

INSTRUCTIONS = "You keep the team's notes. Write what you are asked through your tools, then finish."


def emit(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, **fields}, default=str), flush=True)


async def drive(args: argparse.Namespace, token: str) -> int:
    model = OpenAIChatCompletionsModel(model="fake", openai_client=AsyncOpenAI(base_url=args.model_url,
                                                                               api_key="not-needed"))
    ratchet = RatchetTools(args.ratchet, token=token, run_id=args.run, poll_seconds=0.2)
    agent = Agent(name="notes", instructions=INSTRUCTIONS, tools=ratchet.tools(), model=model)
    if Path(args.state).exists():
        emit("resumed", from_state=args.state)
    # A restarted agent resumes from the saved state, not from the prompt.
    result = await ratchet.run(agent, args.task, state_file=args.state,
                               on_pause=lambda items: emit("paused", call_ids=[i.call_id for i in items]))
    outputs = [item.output for item in result.new_items if item.type == "tool_call_output_item"]
    emit("done", final=result.final_output, tool_outputs=outputs)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ratchet", default="http://127.0.0.1:8000")
    parser.add_argument("--run", required=True)
    parser.add_argument("--model-url", required=True)
    parser.add_argument("--state", default="agent-state.json")
    parser.add_argument("task", nargs="?", default="Write the notes.")
    args = parser.parse_args()
    token = os.environ.get("RATCHET_GATEWAY_TOKEN", "")
    if not token:
        print("set RATCHET_GATEWAY_TOKEN", file=sys.stderr)
        return 2
    set_tracing_disabled(True)  # nothing leaves loopback
    return asyncio.run(drive(args, token))


if __name__ == "__main__":
    sys.exit(main())
