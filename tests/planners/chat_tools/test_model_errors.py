"""Story: every kind of bad model answer gets a typed error, a trace event and a bounded retry (DESIGN.md section 6.7).

Nothing is proposed (so nothing can execute) unless a later attempt gives one valid tool call.
Each story scripts the fake model on loopback; ``max_attempts`` bounds the requests of the step.
"""

from __future__ import annotations

import pytest

from runtime.errors import (
    MalformedModelReplyError,
    ModelAuthError,
    ModelRateLimitedError,
    ModelRefusalError,
    ModelTimeoutError,
    ModelUnavailableError,
    ToolArgumentsError,
    UnknownToolError,
)
from tests.planners.chat_tools.support import Blobs, make_planner, observation, write


def _fails(server, error, *, attempts=2, **options):
    blobs, events, sleeps = Blobs(), [], []
    planner = make_planner(server.base_url, blobs=blobs, events=events, sleeps=sleeps, max_attempts=attempts,
                           **options)
    with pytest.raises(error) as caught:
        planner.propose(cursor=0, planner_state=planner.init_state(), observation=observation(), put_blob=blobs.put)
    assert server.requests_per_step() == {0: attempts}
    assert [(t, p["error"], p["attempt"]) for t, p in events] == [
        ("planner.model_error", error.__name__, n) for n in range(1, attempts + 1)]
    assert f"after {attempts} attempt(s)" in caught.value.message
    return caught.value, events, sleeps


def test_it_retries_a_reply_that_is_not_json(fake_model):
    _, events, sleeps = _fails(fake_model([[{"raw_body": "<html>oops</html>"}]]), MalformedModelReplyError)
    assert len(sleeps) == 1  # one pause between the two attempts, none after the last
    assert all(p["reply"] and p["reply"].startswith("sha256:") for _, p in events)  # the bad reply is evidence


def test_it_refuses_a_reply_without_a_tool_call(fake_model):
    _fails(fake_model([[{"content": "I think I will write a file."}]]), MalformedModelReplyError)


def test_it_refuses_an_unknown_tool(fake_model):
    error, _, _ = _fails(fake_model([[{"tool": "run_shell", "arguments": {"cmd": "rm -rf /"}}]]), UnknownToolError)
    assert error.context["tool"] == "run_shell"


def test_it_refuses_arguments_that_fail_the_schema(fake_model):
    error, _, _ = _fails(fake_model([[{"tool": "write_file", "arguments": {"path": "a.txt", "mode": "0777"}}]]),
                         ToolArgumentsError)
    assert "content" in error.message and "mode" in error.message


def test_it_refuses_arguments_that_are_not_json(fake_model):
    _fails(fake_model([[{"tool": "write_file", "raw_arguments": "{path: a.txt"}]]), ToolArgumentsError)


def test_it_types_a_refusal(fake_model):
    error, _, _ = _fails(fake_model([[{"refusal": "I cannot help with that."}]]), ModelRefusalError)
    assert "I cannot help" in error.message


def test_it_times_out(fake_model):
    error, _, _ = _fails(fake_model([[{"delay": 1.5, **write("a.txt", "late")}]]), ModelTimeoutError,
                         timeout_seconds=0.3)
    assert error.retryable


def test_it_gives_up_after_bounded_rate_limits(fake_model):
    error, _, sleeps = _fails(fake_model([[{"status": 429, "retry_after": 7}]]), ModelRateLimitedError, attempts=3,
                              max_backoff_seconds=0.5)
    assert error.retryable and sleeps == [0.5, 0.5]  # Retry-After honoured, capped by max_backoff_seconds


def test_it_retries_a_rate_limit_then_proposes(fake_model):
    server = fake_model([[{"status": 429, "retry_after": 0}, write("a.txt", "ok")]])
    blobs, events = Blobs(), []
    planner = make_planner(server.base_url, blobs=blobs, events=events)
    step = planner.propose(cursor=0, planner_state=planner.init_state(), observation=observation(), put_blob=blobs.put)
    assert step.proposal.target == "a.txt" and step.state["usage"]["calls"] == 2
    assert [t for t, _ in events] == ["planner.model_error", "planner.model_replied"]
    assert server.requests_per_step() == {0: 2}


def test_it_types_a_server_error(fake_model):
    _fails(fake_model([[{"status": 503}]]), ModelUnavailableError)


def test_it_does_not_retry_a_refused_key(fake_model):
    blobs, events = Blobs(), []
    server = fake_model([[{"status": 401}]])
    planner = make_planner(server.base_url, blobs=blobs, events=events, max_attempts=3)
    with pytest.raises(ModelAuthError):
        planner.propose(cursor=0, planner_state=planner.init_state(), observation=observation(), put_blob=blobs.put)
    assert server.requests_per_step() == {0: 1}


def test_it_types_an_unreachable_server(fake_model):
    server = fake_model([[write("a.txt", "x")]], own=True)
    server.stop()
    blobs = Blobs()
    planner = make_planner(server.base_url, blobs=blobs, max_attempts=2)
    with pytest.raises(ModelUnavailableError):
        planner.propose(cursor=0, planner_state=planner.init_state(), observation=observation(), put_blob=blobs.put)
