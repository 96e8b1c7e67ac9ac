"""A run's tools as the gateway offers them, and a call's arguments checked into an action.

The tools are the chat-tools planner's (DESIGN.md section 6.7): the adapter's actions with
schemas derived from its action models (``write_file``/``delete_file`` for files, each declared
action's model of ``{"target", "params"}``), restricted to the policy's ``allowed_actions`` and
to the token's actions, plus ``finish``. A call is checked here against the same models, then
against the policy, before anything reaches the engine (DESIGN.md section 5.12).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import Action
from runtime.errors import (
    CanonicalizationError,
    GatewayInputError,
    GatewayPayloadTooLargeError,
    GatewayPolicyRefusedError,
    GatewayScopeError,
    GatewayUnknownActionError,
    PlannerError,
    PolicyViolationError,
    ToolArgumentsError,
    UnknownToolError,
)
from runtime.planners.chat_tools.tools import (
    FINISH,
    DeclaredCall,
    DeleteFileArgs,
    FinishArgs,
    Toolset,
    WriteFileArgs,
    toolset_for,
    validate_call,
)
from runtime.taskspec import TaskSpec, policy_check

CALL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
"""A caller's call id: 1-64 characters, letters, digits and ``_.:-`` (so a framework's own
tool-call ids, e.g. ``call_...``, are call ids as they are)."""

MAX_CALL_BYTES = 1_048_576
"""Largest canonical call the gateway accepts, in bytes (``RATCHET_GATEWAY_MAX_BYTES`` overrides)."""


_CACHED_SPECS = 256
_specs: OrderedDict[str, tuple[TaskSpec, Toolset | None]] = OrderedDict()
_specs_lock = threading.Lock()


def run_spec(*, stored: Mapping[str, Any]) -> TaskSpec:
    """The parsed task spec of a run from its stored copy (``run.spec["task"]``), parsed once.

    A run's stored spec never changes, so the gateway keeps the last 256 parsed specs (and their
    toolsets) by the digest of their JSON instead of re-validating and re-loading plug-ins on
    every call; the engine still restores and checks its own copy under the lease (DESIGN.md
    section 5.12).

    Raises:
        TaskSpecError / PluginError: as :meth:`TaskSpec.from_json`.
    """
    key = hashlib.sha256(json.dumps(stored, sort_keys=True, default=str).encode("utf-8")).hexdigest()
    with _specs_lock:
        found = _specs.get(key)
        if found is not None:
            _specs.move_to_end(key)
            return found[0]
    spec = TaskSpec.from_json(stored)
    try:
        toolset: Toolset | None = _toolset(spec)
    except PlannerError:
        toolset = None  # raised again, with its message, when a tool is asked for
    with _specs_lock:
        _specs[key] = (spec, toolset)
        while len(_specs) > _CACHED_SPECS:
            _specs.popitem(last=False)
    return spec


def _toolset(spec: TaskSpec) -> Toolset:
    return toolset_for(spec.environment.adapter, entry=spec.environment.entry,
                       options=spec.environment.options, allowed=tuple(spec.policy.allowed_actions))


def _spec_toolset(spec: TaskSpec) -> Toolset:
    """The toolset of ``spec``, cached with a spec from :func:`run_spec` (else built now)."""
    with _specs_lock:
        found = next((ts for sp, ts in _specs.values() if sp is spec), None)
    return found if found is not None else _toolset(spec)


@dataclass(frozen=True)
class Tool:
    """One tool: ``name``, ``description`` and the JSON schema of its arguments."""

    name: str
    description: str
    input_schema: dict[str, Any]


def run_tools(*, spec: TaskSpec, token_actions: list[str] | None = None) -> list[Tool]:
    """The tools of a run with ``spec``, narrowed to ``token_actions`` when given, plus finish.

    Raises:
        PlannerError: the adapter declares no action the policy allows.
    """
    toolset = _spec_toolset(spec)
    tools = []
    for entry in toolset.tools:
        fn = entry["function"]
        if token_actions and fn["name"] != FINISH and fn["name"] not in token_actions:
            continue
        tools.append(Tool(name=fn["name"], description=plain_text(fn["description"]),
                          input_schema=_plain_descriptions(fn["parameters"])))
    return tools


_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")
_TITLE = re.compile(r"`([^`]+)`")


def plain_text(text: str) -> str:
    """``text`` without reST markup (roles, double and single backquotes): what a model reads as a
    tool description is plain text (DESIGN.md section 5.13); the words are kept."""
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1] if m.group(0).startswith(":class:") else m.group(1),
                     text)
    return _TITLE.sub(r"\1", _LITERAL.sub(r"\1", text))


def _plain_descriptions(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: plain_text(v) if k == "description" and isinstance(v, str) else _plain_descriptions(v)
                for k, v in schema.items()}
    if isinstance(schema, list):
        return [_plain_descriptions(v) for v in schema]
    return schema


def call_check(*, spec: TaskSpec, tool: str, arguments: Any, token_actions: list[str] | None = None,
               max_bytes: int = MAX_CALL_BYTES) -> dict[str, Any]:
    """The normalised action ``{"kind", "target", "params"}`` (or ``{"kind": "finish"}``) of a call.

    Checks, in order: the size, the tool is offered by the run and covered by the token, the
    arguments fit its schema, the policy allows the action. Nothing is touched.

    Raises:
        GatewayPayloadTooLargeError, GatewayUnknownActionError, GatewayScopeError,
        GatewayInputError (schema), GatewayPolicyRefusedError.
    """
    try:
        size = len(canonical_json({"tool": tool, "arguments": arguments}))
    except CanonicalizationError:
        raise GatewayInputError("the call's arguments are not plain JSON", tool=str(tool)[:80]) from None
    if size > max_bytes:
        raise GatewayPayloadTooLargeError(size_bytes=size, limit_bytes=max_bytes)
    try:
        toolset = _spec_toolset(spec)
    except PlannerError as exc:
        raise GatewayUnknownActionError(f"the run offers no tools: {exc.message}") from None
    if not isinstance(tool, str) or (tool != FINISH and tool not in toolset.actions):
        raise GatewayUnknownActionError(tool=str(tool)[:80])
    if token_actions and tool != FINISH and tool not in token_actions:
        raise GatewayScopeError("the token does not cover this action", action=tool)
    try:
        validated = validate_call(toolset, tool, arguments)
    except (UnknownToolError, ToolArgumentsError) as exc:
        raise GatewayInputError(exc.message, tool=tool) from None
    action = _normalised(tool, validated)
    if action["kind"] != FINISH:
        try:
            policy_check(spec, Action(kind=action["kind"], target=action["target"]))
        except PolicyViolationError as exc:
            raise GatewayPolicyRefusedError(exc.message, action=tool) from None
    return action


def _normalised(tool: str, validated: BaseModel | DeclaredCall) -> dict[str, Any]:
    if isinstance(validated, FinishArgs):
        return {"kind": FINISH, "summary": validated.summary}
    if isinstance(validated, DeclaredCall):
        return {"kind": validated.kind, "target": validated.target, "params": validated.params}
    if isinstance(validated, WriteFileArgs):
        return {"kind": "write_file", "target": validated.path,
                "params": {"content": validated.content, "executable": validated.executable}}
    if isinstance(validated, DeleteFileArgs):
        return {"kind": "delete_file", "target": validated.path, "params": {}}
    raise GatewayUnknownActionError(tool=tool[:80])  # pragma: no cover - validate_call returns one of these


def call_id_check(call_id: Any) -> str:
    """``call_id`` if it is a valid call id.

    Raises:
        GatewayInputError: not 1-64 characters of letters, digits and ``_.:-``.
    """
    if not isinstance(call_id, str) or not CALL_ID.match(call_id):
        raise GatewayInputError("call_id must be 1-64 characters: letters, digits and _.:-")
    return call_id


DERIVED_PREFIX = "d-"
"""A call id the gateway derived (:func:`call_id_derive`) starts with this; a caller's own may too."""


def call_id_derive(*, run_id: str, tool: Any, arguments: Any) -> str:
    """The call id of a call whose host supplied none (DESIGN.md section 5.12, "Call ids").

    ``d-`` and 40 hex digits of the SHA-256 of the canonical JSON of ``{run_id, tool,
    arguments}``: the same call repeated gets the same id, so it is answered from the ledger
    instead of executing twice; a call with any other argument gets another id. The model never
    has to invent one.

    Raises:
        GatewayInputError: the arguments are not plain JSON (nothing to derive from).
    """
    try:
        body = canonical_json({"run_id": str(run_id), "tool": tool, "arguments": arguments})
    except CanonicalizationError:
        raise GatewayInputError("the call's arguments are not plain JSON", tool=str(tool)[:80]) from None
    return DERIVED_PREFIX + hashlib.sha256(body).hexdigest()[:40]


def arguments_object(arguments: Any) -> Mapping[str, Any]:
    """``arguments`` if it is a JSON object.

    Raises:
        GatewayInputError: anything else.
    """
    if not isinstance(arguments, Mapping):
        raise GatewayInputError("arguments must be a JSON object")
    return arguments
