"""Story: the fake model speaks chat-completions as the ``openai`` client reads it (DESIGN.md section 6.7)."""

from __future__ import annotations

import openai
import pytest

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


def test_it_answers_the_openai_client_with_tool_calls_and_counts_steps(fake_model):
    server = fake_model([[{"tool": "write_file", "arguments": {"path": "a", "content": "b"}}], [{"finish": "ok"}]])
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10)
    first = client.chat.completions.create(model="m", messages=MESSAGES)
    call = first.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, first.usage.total_tokens > 0) == ("call_0", "write_file", True)
    second = client.chat.completions.create(model="m", messages=[
        *MESSAGES, {"role": "assistant", "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": "call_0", "content": "{}"}])
    assert second.choices[0].message.tool_calls[0].function.name == "finish"
    with pytest.raises(openai.RateLimitError):  # a new script: counters start again at zero
        server.load([[{"status": 429, "retry_after": 0}]])
        client.chat.completions.create(model="m", messages=MESSAGES)
    assert server.requests_per_step() == {0: 1}
