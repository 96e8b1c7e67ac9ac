"""The tools a chat-tools planner offers: the adapter's actions with their JSON schemas (DESIGN.md section 6.7).

Each action an adapter accepts is offered as one function tool whose parameters are a pydantic
model (its JSON schema is what the model sees, and the same model validates the arguments the
model sends back). ``finish`` ends the plan. A tool call becomes an :class:`Action` here, by
deterministic code: file content goes to content-addressed blobs (the action carries only the
digest, as the scripted planner does) and the risk comes from the planner's options, never from
the model. Whether the action is *allowed* is still the engine's policy gate. Framework-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from runtime.core.canonical import canonical_json, digest_bytes
from runtime.core.checkpoint import Action, Risk
from runtime.errors import PlannerError, ToolArgumentsError, UnknownToolError
from runtime.planners.base import Done, PutBlob

FINISH = "finish"
MAX_CONTENT_CHARS = 1_000_000


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class WriteFileArgs(_Args):
    """Write UTF-8 ``content`` to the relative ``path`` (created or replaced)."""

    path: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    content: Annotated[str, StringConstraints(max_length=MAX_CONTENT_CHARS)]
    executable: bool = False


class DeleteFileArgs(_Args):
    """Delete the file at the relative ``path``."""

    path: Annotated[str, StringConstraints(min_length=1, max_length=4096)]


class FinishArgs(_Args):
    """The task is complete; ``summary`` says what was done."""

    summary: Annotated[str, StringConstraints(max_length=2000)] = ""


ACTION_ARGS: dict[str, type[_Args]] = {"write_file": WriteFileArgs, "delete_file": DeleteFileArgs}
"""Every action kind this planner can express, with its argument model."""

ADAPTER_ACTIONS: dict[str, tuple[str, ...]] = {"workspace": ("write_file", "delete_file"),
                                               "git": ("write_file", "delete_file")}
"""The actions each adapter declares (``runtime/adapters/actions.py``: ``write_file``/``delete_file``)."""


@dataclass(frozen=True)
class Toolset:
    """The tools offered for one adapter, and their pinned digest.

    Attributes:
        actions: the action kinds offered, in order.
        tools: the ``tools`` list sent with every request (OpenAI function-tool format).
        digest: ``sha256:<hex>`` over the canonical JSON of ``tools``: the tool-schema version.
    """

    actions: tuple[str, ...]
    tools: list[dict[str, Any]]
    digest: str


def _tool(name: str, model: type[_Args]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": (model.__doc__ or "").strip(),
                                             "parameters": model.model_json_schema()}}


def toolset_for(adapter: str) -> Toolset:
    """The tools for ``adapter`` (its declared actions plus ``finish``).

    Raises:
        PlannerError: the adapter declares no action this planner can offer.
    """
    actions = ADAPTER_ACTIONS.get(adapter, ())
    if not actions:
        raise PlannerError(f"the chat-tools planner cannot offer tools for adapter {adapter!r:.80}",
                           adapter=adapter[:80])
    tools = [_tool(kind, ACTION_ARGS[kind]) for kind in actions] + [_tool(FINISH, FinishArgs)]
    return Toolset(actions=actions, tools=tools, digest=digest_bytes(canonical_json(tools)))


def validate_call(toolset: Toolset, name: str, arguments: Any) -> _Args:
    """The validated arguments of a call to ``name``.

    Raises:
        UnknownToolError: ``name`` was not offered.
        ToolArgumentsError: ``arguments`` is not an object or fails the tool's schema (the
            error lists each failing field, never the values).
    """
    if name == FINISH:
        model: type[_Args] = FinishArgs
    elif name in toolset.actions:
        model = ACTION_ARGS[name]
    else:
        raise UnknownToolError(f"the model called {name!r:.80}, which was not offered", tool=name[:80])
    if not isinstance(arguments, Mapping):
        raise ToolArgumentsError("tool arguments must be a JSON object", tool=name)
    try:
        return model.model_validate(dict(arguments))
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors())
        raise ToolArgumentsError(f"arguments fail the {name} schema: {fields[:500]}", tool=name) from None


def call_to_proposal(name: str, args: _Args, *, risks: Mapping[str, Risk], put_blob: PutBlob) -> Action | Done:
    """The :class:`Action` (or :class:`Done`) for a validated call; content goes to ``put_blob``."""
    if isinstance(args, FinishArgs):
        return Done(reason=f"the model called finish: {args.summary}"[:500])
    risk = Risk(risks.get(name, Risk.HIGH))  # an action kind without a configured risk is high
    params: dict[str, Any] = {}
    if isinstance(args, WriteFileArgs):
        params = {"content": put_blob(args.content.encode("utf-8")), "executable": args.executable}
    elif not isinstance(args, DeleteFileArgs):
        raise PlannerError(f"no action for tool {name!r:.80}", tool=name[:80])
    try:
        return Action(kind=name, target=args.path, params=params, risk=risk)
    except ValidationError as exc:  # e.g. a target the action model refuses
        raise ToolArgumentsError(f"arguments do not make a valid {name} action: "
                                 f"{exc.errors()[0]['msg'][:200]}", tool=name) from None
