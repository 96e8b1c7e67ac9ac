"""Story: the API key reaches the model server and nothing else (DESIGN.md section 6.7)."""

from __future__ import annotations

import json

from tests.planners.chat_tools.support import Blobs, make_planner, observation, write

KEY = "sk-test-" + "k3y" * 10


def test_it_sends_the_key_but_never_stores_or_traces_it(fake_model, monkeypatch):
    monkeypatch.setenv("MY_MODEL_KEY", KEY)
    server = fake_model([[write("a.txt", "1")], [{"status": 429}, write("b.txt", "2")]],
                        expect_key_env="MY_MODEL_KEY")
    blobs, events = Blobs(), []
    planner = make_planner(server.base_url, blobs=blobs, events=events, api_key_env="MY_MODEL_KEY")
    state = planner.propose(cursor=0, planner_state=planner.init_state(), observation=observation(),
                            put_blob=blobs.put).state
    state = planner.propose(cursor=1, planner_state=state, observation=observation("w1"), put_blob=blobs.put).state
    assert server.stats()["auth"] == {"matched": 3}
    stored = [json.dumps(state), json.dumps(events), repr(planner), *(b.decode("utf-8", "replace")
                                                                      for b in blobs.data.values())]
    assert not any(KEY in text or "k3yk3y" in text for text in stored)
