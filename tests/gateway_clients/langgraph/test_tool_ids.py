"""The integration's edges without a server: the SDK core stays free of LangGraph, a tool-call id
becomes a stable call id, and the model never sees the injected id (DESIGN.md section 5.12)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from ratchet_client.call_ids import CALL_ID, ratchet_call_id
from ratchet_client.langgraph import CALL_ID_PREFIX, _args_model
from ratchet_client.models import Tool

from runtime.gateway.tools import CALL_ID as SERVER_CALL_ID


def test_the_sdk_core_imports_nothing_of_langchain_or_langgraph() -> None:
    probe = ("import sys, ratchet_client, ratchet_client.call_ids, ratchet_client.retries; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('langchain_core', 'langgraph')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


@pytest.mark.parametrize("tool_call_id", ["call_Ab12.x:y-z", "toolu_01AbC", "toolu_" + "9" * 80, "id with spaces"])
def test_a_tool_call_id_is_a_stable_call_id_the_server_takes(tool_call_id: str) -> None:
    mapped = ratchet_call_id(tool_call_id, prefix=CALL_ID_PREFIX)
    assert SERVER_CALL_ID.match(mapped) and CALL_ID.pattern == SERVER_CALL_ID.pattern
    assert mapped == ratchet_call_id(tool_call_id, prefix=CALL_ID_PREFIX)
    assert (mapped == tool_call_id) == (len(tool_call_id) <= 64 and " " not in tool_call_id)


def test_an_empty_tool_call_id_is_refused() -> None:
    with pytest.raises(ValueError, match="ToolCall"):
        ratchet_call_id("", prefix=CALL_ID_PREFIX)


def test_the_model_sees_the_arguments_and_not_the_call_id() -> None:
    tool = Tool(name="write_file", description="Write a file.", input_schema={
        "type": "object", "required": ["path", "content"],
        "properties": {"path": {"type": "string"}, "content": {"type": "string"},
                       "executable": {"type": "boolean", "default": False}, "call_id": {"type": "string"}}})
    model = _args_model(tool)
    shown = convert_to_openai_tool(StructuredTool.from_function(lambda **kw: "", name="write_file",
                                                                description="Write a file.", args_schema=model))
    params = shown["function"]["parameters"]
    assert sorted(params["properties"]) == ["content", "executable", "path"]
    assert sorted(params["required"]) == ["content", "path"]
