"""One chat-completions request through the maintained ``openai`` client, errors typed (DESIGN.md section 6.7).

The client never retries by itself (``max_retries=0``): retries are the planner's, bounded and
traced. The raw HTTP body is returned so that it can be recorded byte for byte before anything
is parsed. The API key is handed to the ``openai`` client and nowhere else: no error message,
trace event or state built here contains it. Framework-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openai

from runtime.errors import (
    ModelAuthError,
    ModelRateLimitedError,
    ModelReplyError,
    ModelTimeoutError,
    ModelUnavailableError,
)


@dataclass(frozen=True)
class ModelEndpoint:
    """Where and how to ask. ``api_key`` is excluded from ``repr`` so it never reaches a log."""

    base_url: str
    model: str
    timeout_seconds: float
    api_key: str = ""

    def __repr__(self) -> str:
        return f"ModelEndpoint(base_url={self.base_url!r}, model={self.model!r}, timeout={self.timeout_seconds})"


def retry_after_seconds(exc: openai.APIStatusError) -> float | None:
    """The ``Retry-After`` of a 429 in seconds, or None when absent or not a number."""
    value = exc.response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def model_ask(endpoint: ModelEndpoint, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> bytes:
    """POST one chat-completions request and return the raw response body.

    Args:
        endpoint: base URL, model, timeout (seconds) and key.
        messages: the conversation (system, user, assistant tool calls, tool results).
        tools: the offered tools (``Toolset.tools``).

    Raises:
        ModelTimeoutError: no answer within the timeout.
        ModelRateLimitedError: 429; ``context["retry_after"]`` holds the server's pause in seconds.
        ModelUnavailableError: connection refused or reset, or a 5xx.
        ModelAuthError: 401/403 or another 4xx.
    """
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key or "no-key",
                           timeout=endpoint.timeout_seconds, max_retries=0)
    try:
        with client:
            # Plain dicts are the wire format; the client's TypedDicts describe the same JSON.
            response = client.chat.completions.with_raw_response.create(  # type: ignore[call-overload]
                model=endpoint.model, messages=messages, tools=tools, tool_choice="required",
                parallel_tool_calls=False, temperature=0)
            return response.http_response.content
    except openai.APITimeoutError:
        raise ModelTimeoutError(timeout_seconds=endpoint.timeout_seconds) from None
    except openai.APIConnectionError as exc:
        raise ModelUnavailableError(f"cannot reach the model server: {type(exc.__cause__ or exc).__name__}",
                                    base_url=endpoint.base_url) from None
    except openai.RateLimitError as exc:
        raise ModelRateLimitedError(status=429, retry_after=retry_after_seconds(exc)) from None
    except openai.APIStatusError as exc:
        if exc.status_code >= 500:
            raise ModelUnavailableError(f"the model server answered {exc.status_code}",
                                        status=exc.status_code) from None
        raise ModelAuthError(f"the model server refused the request with {exc.status_code}",
                             status=exc.status_code) from None
    except openai.OpenAIError as exc:  # anything else the client raises is not a usable reply
        raise ModelReplyError(f"the openai client failed: {type(exc).__name__}") from None
