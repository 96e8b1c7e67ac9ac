"""Story: the model's budgets stop the planner before it asks again (DESIGN.md section 6.7)."""

from __future__ import annotations

import pytest

from runtime.errors import ModelBudgetExhaustedError
from tests.planners.chat_tools.support import Blobs, make_planner, observation, write


def test_it_stops_at_the_model_call_budget(fake_model):
    server, blobs = fake_model([[write("a.txt", "1")], [write("b.txt", "2")]]), Blobs()
    planner = make_planner(server.base_url, blobs=blobs, max_model_calls=1)
    step = planner.propose(cursor=0, planner_state=planner.init_state(), observation=observation(), put_blob=blobs.put)
    with pytest.raises(ModelBudgetExhaustedError) as caught:
        planner.propose(cursor=1, planner_state=step.state, observation=observation("w1"), put_blob=blobs.put)
    assert caught.value.context == {"budget": "calls", "used": 1, "limit": 1}
    assert server.requests_per_step() == {0: 1}  # the spent budget cost no request


def test_it_stops_at_the_token_budget(fake_model):
    server, blobs = fake_model([[{**write("a.txt", "1"), "completion_tokens": 500}], [write("b.txt", "2")]]), Blobs()
    planner = make_planner(server.base_url, blobs=blobs, max_tokens=400)
    step = planner.propose(cursor=0, planner_state=planner.init_state(), observation=observation(), put_blob=blobs.put)
    assert step.state["usage"]["tokens"] >= 500
    with pytest.raises(ModelBudgetExhaustedError, match="token budget of 400 used"):
        planner.propose(cursor=1, planner_state=step.state, observation=observation("w1"), put_blob=blobs.put)
    assert server.requests_per_step() == {0: 1}


def test_it_counts_failed_attempts_against_the_call_budget(fake_model):
    server, blobs = fake_model([[{"status": 500}]]), Blobs()
    planner = make_planner(server.base_url, blobs=blobs, max_model_calls=2, max_attempts=5)
    with pytest.raises(ModelBudgetExhaustedError):
        planner.propose(cursor=0, planner_state=planner.init_state(), observation=observation(), put_blob=blobs.put)
    assert server.requests_per_step() == {0: 2}
