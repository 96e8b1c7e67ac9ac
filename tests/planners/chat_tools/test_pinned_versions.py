"""Story: a resume under another model, prompt or tool schema fails closed (DESIGN.md section 6.7)."""

from __future__ import annotations

import pytest

from runtime.errors import ModelPinMismatchError
from runtime.planners.chat_tools import tools as chat_tools_tools
from tests.planners.chat_tools.support import Blobs, make_planner, observation, write


def _committed(server, blobs):
    planner = make_planner(server.base_url, blobs=blobs)
    return planner.propose(cursor=0, planner_state=planner.init_state(), observation=observation(),
                           put_blob=blobs.put).state


def test_it_refuses_to_resume_under_another_model(fake_model):
    server, blobs = fake_model([[write("a.txt", "1")], [write("b.txt", "2")]]), Blobs()
    state = _committed(server, blobs)
    with pytest.raises(ModelPinMismatchError) as caught:
        make_planner(server.base_url, blobs=blobs, model="fake-2").propose(
            cursor=1, planner_state=state, observation=observation("w1"), put_blob=blobs.put)
    assert "model: pinned 'fake-1', now 'fake-2'" in caught.value.message
    assert server.requests_per_step() == {0: 1}  # never asked under the wrong pins


def test_it_refuses_to_resume_under_another_prompt(fake_model):
    server, blobs = fake_model([[write("a.txt", "1")]]), Blobs()
    state = _committed(server, blobs)
    with pytest.raises(ModelPinMismatchError, match="prompt"):
        make_planner(server.base_url, blobs=blobs, system_prompt="Be creative.").propose(
            cursor=1, planner_state=state, observation=observation("w1"), put_blob=blobs.put)


def test_it_refuses_to_resume_under_another_tool_schema(fake_model, monkeypatch):
    server, blobs = fake_model([[write("a.txt", "1")]]), Blobs()
    state = _committed(server, blobs)
    monkeypatch.setitem(chat_tools_tools.ADAPTER_ACTIONS, "workspace", ("write_file",))  # a code change
    with pytest.raises(ModelPinMismatchError, match="tool_schema"):
        make_planner(server.base_url, blobs=blobs).propose(
            cursor=0, planner_state=state, observation=observation(), put_blob=blobs.put)


def test_it_takes_the_model_from_the_environment_and_pins_it(fake_model, monkeypatch):
    server, blobs = fake_model([[write("a.txt", "1")]]), Blobs()
    monkeypatch.setenv("RATCHET_MODEL", "env-model")
    planner = make_planner(server.base_url, blobs=blobs, model=None)
    state = planner.init_state()
    monkeypatch.setenv("RATCHET_MODEL", "other-model")
    with pytest.raises(ModelPinMismatchError):
        make_planner(server.base_url, blobs=blobs, model=None).propose(
            cursor=0, planner_state=state, observation=observation(), put_blob=blobs.put)
