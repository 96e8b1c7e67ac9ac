"""Story: the model proposes writes through tool calls; the planner records each reply (DESIGN.md section 6.7).

Against the fake model server on loopback: two ``write_file`` calls and ``finish`` become two
actions and Done; content goes to content-addressed blobs; the risk comes from the options; every
reply and the transcript are recorded by digest in the new state; the model is asked once per step.
"""

from __future__ import annotations

import json

from runtime.core.checkpoint import Action, Risk
from runtime.planners.base import Done
from tests.planners.chat_tools.support import Blobs, make_planner, observation, write


def test_it_proposes_writes_from_tool_calls(fake_model):
    server = fake_model([[write("hello.txt", "hello\n")], [write("notes/todo.md", "- ship\n")],
                         [{"finish": "both files written"}]])
    blobs, events = Blobs(), []
    planner = make_planner(server.base_url, blobs=blobs, events=events)
    state = planner.init_state()
    assert state["pins"] == planner.pins and state["cursor"] == -1

    first = planner.propose(cursor=0, planner_state=state, observation=observation("w0"), put_blob=blobs.put)
    assert isinstance(first.proposal, Action)
    assert (first.proposal.kind, first.proposal.target, first.proposal.risk) == ("write_file", "hello.txt", Risk.LOW)
    assert blobs.get(first.proposal.params["content"]) == b"hello\n"
    assert first.state["cursor"] == 0 and first.state["usage"]["calls"] == 1 and first.state["usage"]["tokens"] > 0
    assert json.loads(blobs.get(first.state["reply"]))["choices"][0]["message"]["tool_calls"][0]["id"] == "call_0"

    second = planner.propose(cursor=1, planner_state=first.state, observation=observation("w1"), put_blob=blobs.put)
    assert second.proposal.target == "notes/todo.md"
    transcript = json.loads(blobs.get(second.state["transcript"]))
    assert [m["role"] for m in transcript] == ["system", "user", "assistant", "tool", "assistant"]
    assert transcript[3]["tool_call_id"] == "call_0" and "w1" in transcript[3]["content"]

    done = planner.propose(cursor=2, planner_state=second.state, observation=observation("w2"), put_blob=blobs.put)
    assert isinstance(done.proposal, Done) and "both files written" in done.proposal.reason
    assert server.requests_per_step() == {0: 1, 1: 1, 2: 1}
    assert [t for t, _ in events] == ["planner.model_replied"] * 3


def test_it_decides_the_risk_of_a_deletion_itself(fake_model):
    server = fake_model([[{"tool": "delete_file", "arguments": {"path": "old.txt"}}]])
    blobs = Blobs()
    planner = make_planner(server.base_url, blobs=blobs)
    step = planner.propose(cursor=0, planner_state=planner.init_state(), observation=observation(), put_blob=blobs.put)
    assert (step.proposal.kind, step.proposal.params, step.proposal.risk) == ("delete_file", {}, Risk.HIGH)
