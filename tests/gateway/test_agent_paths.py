"""Story: a path an agent chooses is held to the task spec's rule (N12, DESIGN.md section 2.2).

A gateway caller or a model that names a file with an invisible character (U+202E RIGHT-TO-LEFT
OVERRIDE, a zero-width space) would show an approver another name than the one written; the task
spec loader already refuses such paths, and so do the gateway and the chat-tools planner now,
with a typed error before anything is recorded or executed.
"""

from __future__ import annotations

import json

import pytest

from runtime.errors import ToolArgumentsError
from runtime.models import Run
from runtime.planners.chat_tools.tools import toolset_for, validate_call

pytestmark = pytest.mark.django_db(transaction=True)

INVISIBLE = ["notes/evil\u202etxt.exe", "notes/a\u200bb.txt", "notes/\ufeffbom.txt"]


@pytest.mark.parametrize("path", INVISIBLE)
def test_n12_it_refuses_an_invisible_character_in_a_gateway_call_path(client, gw, path):
    generation = Run.objects.get(run_id=gw.run_id).generation
    body = {"call_id": "c1", "tool": "write_file", "arguments": {"path": path, "content": "x\n"}}

    response = client.post(f"/api/v1/runs/{gw.run_id}/calls", data=json.dumps(body),
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {gw.token}")

    assert response.status_code == 422, response.content
    assert response.json()["error"]["code"] == "invalid_input"
    assert "invisible" in response.json()["error"]["message"]
    assert Run.objects.get(run_id=gw.run_id).generation == generation
    assert gw.effects() == {}


@pytest.mark.parametrize("path", INVISIBLE)
def test_n12_it_refuses_an_invisible_character_in_a_models_tool_call(path):
    toolset = toolset_for("workspace", allowed=("write_file", "delete_file"))

    for tool, arguments in (("write_file", {"path": path, "content": "x\n"}), ("delete_file", {"path": path})):
        with pytest.raises(ToolArgumentsError, match="invisible"):
            validate_call(toolset, tool, arguments)


def test_it_still_accepts_a_plain_unicode_name():
    toolset = toolset_for("workspace", allowed=("write_file",))
    validated = validate_call(toolset, "write_file", {"path": "notes/café.txt", "content": "x\n"})
    assert validated.path == "notes/café.txt"
