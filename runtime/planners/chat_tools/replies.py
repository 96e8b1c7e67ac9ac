"""Recording and replaying model replies (DESIGN.md section 6.7).

Every reply is kept exactly as the server sent it (the HTTP body's bytes), content-addressed, and
is always *parsed from those stored bytes*, so a live reply and its replay after a crash go through
the same code and give the same proposal. The conversation so far (the messages sent, plus the
assistant's tool call) is one more content-addressed blob, the *transcript*; the planner state keeps
only the two digests, so it stays small however long the run. Framework-free.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.core.canonical import canonical_json
from runtime.errors import (
    MalformedModelReplyError,
    ModelRefusalError,
    ModelReplyMissingError,
    RatchetError,
    ToolArgumentsError,
)
from runtime.planners.base import PutBlob
from runtime.planners.chat_tools.tools import Toolset, validate_call

GetBlob = Callable[[str], bytes]
"""``digest -> bytes`` from the attachment store (checked against the digest by the store)."""


@dataclass(frozen=True)
class ParsedReply:
    """One usable reply: a single tool call.

    Attributes:
        name: the tool called. arguments: the validated argument model.
        call_id: the tool call's id (the next request answers it).
        assistant: the assistant message to append to the transcript (the tool call only).
        tokens: ``usage.total_tokens`` as reported (0 when the server reports none).
    """

    name: str
    arguments: Any
    call_id: str
    assistant: dict[str, Any]
    tokens: int


def reply_tokens(raw: bytes) -> int:
    """``usage.total_tokens`` of a raw reply, 0 when absent or unreadable (for the budget)."""
    try:
        usage = json.loads(raw).get("usage") or {}
        tokens = usage.get("total_tokens", 0)
    except (ValueError, AttributeError):
        return 0
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0 else 0


def parse_reply(raw: bytes, toolset: Toolset) -> ParsedReply:
    """Parse a recorded chat-completion body into its single tool call.

    Raises:
        MalformedModelReplyError: not JSON, not a chat completion, no tool call or several.
        ModelRefusalError: the model refused (``message.refusal`` or ``finish_reason`` content_filter).
        UnknownToolError / ToolArgumentsError: see :func:`validate_call`.
    """
    try:
        body = json.loads(raw)
        message = body["choices"][0]["message"]
        finish_reason = body["choices"][0].get("finish_reason")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise MalformedModelReplyError(
            "the reply is not a chat completion (not JSON or no choices[0].message)") from None
    if not isinstance(message, dict):
        raise MalformedModelReplyError("choices[0].message is not an object")
    if message.get("refusal") or finish_reason == "content_filter":
        raise ModelRefusalError(f"the model refused: {str(message.get('refusal') or finish_reason)[:300]}")
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list) or len(calls) != 1:
        raise MalformedModelReplyError(f"the reply has {len(calls) if isinstance(calls, list) else 'no'} tool "
                                       "calls; exactly one is needed")
    call = calls[0]
    try:
        call_id = str(call["id"])
        name = str(call["function"]["name"])
        arguments_text = call["function"].get("arguments") or "{}"
    except (KeyError, TypeError, AttributeError):
        raise MalformedModelReplyError("the tool call has no id or function name") from None
    try:
        arguments = json.loads(arguments_text)
    except (ValueError, TypeError):
        raise ToolArgumentsError("the tool call's arguments are not JSON", tool=name[:80]) from None
    validated = validate_call(toolset, name, arguments)
    assistant = {"role": "assistant", "content": None,
                 "tool_calls": [{"id": call_id, "type": "function",
                                 "function": {"name": name, "arguments": arguments_text}}]}
    return ParsedReply(name=name, arguments=validated, call_id=call_id, assistant=assistant,
                       tokens=reply_tokens(raw))


def recorded(get_blob: GetBlob, digest: str, *, what: str) -> bytes:
    """The bytes of a recorded reply or transcript committed with the run.

    Raises:
        ModelReplyMissingError: the store has no such blob or it does not verify.
    """
    try:
        return get_blob(digest)
    except (RatchetError, LookupError, OSError) as exc:
        raise ModelReplyMissingError(f"the recorded {what} cannot be read: {type(exc).__name__}",
                                     digest=digest) from None


def transcript_put(messages: list[dict[str, Any]], put_blob: PutBlob) -> str:
    """Store the conversation (a list of chat messages) and return its digest."""
    return put_blob(canonical_json(messages))


def transcript_get(get_blob: GetBlob, digest: str) -> list[dict[str, Any]]:
    """The conversation stored by :func:`transcript_put`.

    Raises:
        ModelReplyMissingError: missing, corrupt or not a list of messages.
    """
    try:
        messages = json.loads(recorded(get_blob, digest, what="transcript"))
    except ValueError:
        raise ModelReplyMissingError("the recorded transcript is not JSON", digest=digest) from None
    if not isinstance(messages, list):
        raise ModelReplyMissingError("the recorded transcript is not a list of messages", digest=digest)
    return messages
