"""Story: a committed reply is replayed, never asked again (DESIGN.md section 6.7)."""

from __future__ import annotations

import pytest

from runtime.errors import ModelReplyMissingError, PlannerStateError
from tests.planners.chat_tools.support import Blobs, make_planner, observation, write


def test_it_replays_a_committed_reply_without_asking_the_model(fake_model):
    server = fake_model([[write("a.txt", "one")]])
    blobs, events = Blobs(), []
    planner = make_planner(server.base_url, blobs=blobs, events=events)
    step = planner.propose(cursor=0, planner_state=planner.init_state(), observation=observation(), put_blob=blobs.put)
    # A new process (a resume) gets the committed state and asks for the same cursor again.
    again = make_planner(server.base_url, blobs=blobs, events=events).propose(
        cursor=0, planner_state=step.state, observation=observation(), put_blob=blobs.put)
    assert again.proposal.intent_digest() == step.proposal.intent_digest()
    assert again.state == step.state
    assert server.requests_per_step() == {0: 1}
    assert events[-1][0] == "planner.reply_replayed"


def test_it_fails_closed_when_a_recorded_reply_is_missing(fake_model):
    server = fake_model([[write("a.txt", "one")]])
    blobs = Blobs()
    planner = make_planner(server.base_url, blobs=blobs)
    step = planner.propose(cursor=0, planner_state=planner.init_state(), observation=observation(), put_blob=blobs.put)
    del blobs.data[step.state["reply"]]
    with pytest.raises(ModelReplyMissingError):
        planner.propose(cursor=0, planner_state=step.state, observation=observation(), put_blob=blobs.put)
    assert server.requests_per_step() == {0: 1}


def test_it_refuses_a_state_from_another_step(fake_model):
    server = fake_model([[write("a.txt", "one")]])
    blobs = Blobs()
    planner = make_planner(server.base_url, blobs=blobs)
    with pytest.raises(PlannerStateError):
        planner.propose(cursor=3, planner_state=planner.init_state(), observation=observation(), put_blob=blobs.put)
    assert server.stats()["total"] == 0
