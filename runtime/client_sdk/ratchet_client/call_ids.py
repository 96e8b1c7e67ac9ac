"""A framework's tool-call id as a Ratchet call id (Ratchet's DESIGN.md section 5.12, "Call ids").

Shared by the framework integrations (:mod:`ratchet_client.langgraph`,
:mod:`ratchet_client.openai_agents`); imports nothing of any framework.
"""

from __future__ import annotations

import hashlib
import re

CALL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
"""The ids Ratchet takes as they are (the gateway's own rule: at most 64 characters of ``[A-Za-z0-9_.:-]``)."""


def ratchet_call_id(tool_call_id: str, *, prefix: str) -> str:
    """The Ratchet call id of a framework's tool-call id: the id itself when Ratchet takes it as
    it is (``call_...``, ``toolu_...``), else ``prefix`` and 40 hex digits of its SHA-256 (the
    same id always maps to the same call id, so a resumed run still repeats its calls).

    Args:
        tool_call_id: the tool call's id as the framework persisted it (non-empty).
        prefix: marks a hashed id's framework (``"lc-"``, ``"oa-"``); at most 20 characters of
            the gateway's alphabet, starting with a letter or digit.

    Raises:
        ValueError: ``tool_call_id`` is empty (the tool was not invoked with a full ToolCall), or
            ``prefix`` would make an id the gateway refuses.
    """
    if not tool_call_id:
        raise ValueError("a Ratchet tool needs the id of the ToolCall that invoked it; none was given")
    if CALL_ID.match(tool_call_id):
        return tool_call_id
    if len(prefix) > 20 or not CALL_ID.match(prefix):
        raise ValueError(f"the call id prefix {prefix[:30]!r} is not 1-20 characters of [A-Za-z0-9_.:-]")
    return prefix + hashlib.sha256(tool_call_id.encode()).hexdigest()[:40]
