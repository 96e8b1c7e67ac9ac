"""Story: the chat-tools ``[planner]`` table is validated field by field (DESIGN.md section 6.7)."""

from __future__ import annotations

import pytest

from runtime.errors import PlannerError, TaskSpecError
from runtime.planners.chat_tools.options import ChatToolsOptions
from runtime.taskspec import load_task_spec
from tests.planners.chat_tools.support import write_chat_task


def test_it_reports_each_bad_option_by_its_toml_path(tmp_path):
    task = write_chat_task(tmp_path, base_url="http://127.0.0.1:9/v1",
                           extra='timeout_seconds = 0\napi_key_env = "sk-live-abc123"\ntemperature = 1')
    with pytest.raises(TaskSpecError) as caught:
        load_task_spec(task)
    message = caught.value.message
    for path in ("planner.timeout_seconds", "planner.api_key_env", "planner.temperature"):
        assert path in message
    assert "sk-live-abc123" not in message  # a key pasted by mistake is not echoed back


def test_it_accepts_a_valid_table(tmp_path):
    spec = load_task_spec(write_chat_task(tmp_path, base_url="http://127.0.0.1:9/v1"))
    assert spec.planner.kind == "chat-tools"


def test_it_needs_a_model_and_an_endpoint(monkeypatch):
    monkeypatch.delenv("RATCHET_MODEL", raising=False)
    monkeypatch.delenv("RATCHET_MODEL_BASE_URL", raising=False)
    options = ChatToolsOptions.model_validate({"task": "t"})
    with pytest.raises(PlannerError, match="RATCHET_MODEL"):
        options.resolved_model()
    with pytest.raises(PlannerError, match="RATCHET_MODEL_BASE_URL"):
        options.resolved_base_url()
