"""The versions a chat-tools run is pinned to: model, prompt digest, tool-schema digest (DESIGN.md section 6.7).

They are resolved when the run is created, kept in the planner state, and compared on every
proposal: a resume under another model name (``RATCHET_MODEL`` changed), another system prompt or
task, or another tool schema (the adapter's actions changed with the code) fails closed with
:class:`ModelPinMismatchError` before the model is asked. Framework-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.core.canonical import canonical_json, digest_bytes
from runtime.errors import ModelPinMismatchError

PIN_FIELDS = ("model", "prompt", "tool_schema")


def prompt_digest(*, system_prompt: str, task: str) -> str:
    """``sha256:<hex>`` over the canonical JSON of the system prompt and the task."""
    return digest_bytes(canonical_json({"system": system_prompt, "task": task}))


def pins_make(*, model: str, prompt: str, tool_schema: str) -> dict[str, str]:
    """The pins as kept in the planner state: ``{"model", "prompt", "tool_schema"}``."""
    return {"model": model, "prompt": prompt, "tool_schema": tool_schema}


def pins_check(pinned: Any, current: Mapping[str, str]) -> None:
    """Compare the pins committed with the run to the ones this process would use.

    Raises:
        ModelPinMismatchError: a field differs or is missing; the message names each field with
            the pinned and the current value (model names and digests, never a key).
    """
    if not isinstance(pinned, Mapping):
        raise ModelPinMismatchError("the planner state holds no pinned versions")
    differ = [f"{name}: pinned {pinned.get(name)!r:.90}, now {current[name]!r:.90}"
              for name in PIN_FIELDS if pinned.get(name) != current[name]]
    if differ:
        raise ModelPinMismatchError("resume refused, pinned versions differ: " + "; ".join(differ),
                                    fields=",".join(n for n in PIN_FIELDS if pinned.get(n) != current[n]))
