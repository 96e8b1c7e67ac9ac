"""The tools a chat-tools planner offers: the adapter's actions with their JSON schemas (DESIGN.md section 6.7).

Each action an adapter accepts is offered as one function tool whose parameters are a pydantic
model (its JSON schema is what the model sees, and the same model validates the arguments the
model sends back). Two sources: the file actions of the ``workspace`` and ``git`` adapters
(``write_file``/``delete_file``, argument models here), and the actions an adapter plug-in
*declares* (``action_models(options=...)``: the HTTP adapter's ``http_request``, one per SQL
template), whose models of ``{"target", "params"}`` are offered as they are, with the run's
adapter options (allowed methods, parameter schemas, secret inputs). Only the kinds the run's
policy lists in ``allowed_actions`` are offered. ``finish`` ends the plan.

A tool call becomes an :class:`Action` here, by deterministic code: file content goes to
content-addressed blobs (the action carries only the digest, as the scripted planner does), a
declared action takes the validated ``target`` and ``params`` verbatim, and the risk comes from
the planner's options, never from the model. Whether the action is *allowed* is still the
engine's policy gate and the adapter's own checks. Framework-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints, ValidationError

from runtime.core.canonical import canonical_json, digest_bytes
from runtime.core.checkpoint import Action, Risk
from runtime.errors import PlannerError, ToolArgumentsError, UnknownToolError
from runtime.planners.base import Done, PutBlob
from runtime.plugins.registry import ADAPTERS, plugin_load
from runtime.taskspec.offered_actions import FILE_ADAPTER_ACTIONS
from runtime.taskspec.paths import spec_path_problem

FINISH = "finish"
MAX_CONTENT_CHARS = 1_000_000


def _agent_path(value: str) -> str:
    # A path an agent chose (a model's tool call, a gateway caller) is held to the rule of a path
    # written in a task spec: besides the adapters' own rule, no invisible character (U+202E
    # and the like would show an approver another name than the one written; DESIGN.md
    # section 2.2). Checked after validation, so the schema the model sees is unchanged.
    problem = spec_path_problem(value)
    if problem:
        raise ValueError(problem)
    return value


AgentPath = Annotated[str, StringConstraints(min_length=1, max_length=4096), AfterValidator(_agent_path)]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class WriteFileArgs(_Args):
    """Write UTF-8 ``content`` to the relative ``path`` (created or replaced)."""

    path: AgentPath
    content: Annotated[str, StringConstraints(max_length=MAX_CONTENT_CHARS)]
    executable: bool = False


class DeleteFileArgs(_Args):
    """Delete the file at the relative ``path``."""

    path: AgentPath


class FinishArgs(_Args):
    """The task is complete; ``summary`` says what was done."""

    summary: Annotated[str, StringConstraints(max_length=2000)] = ""


ACTION_ARGS: dict[str, type[_Args]] = {"write_file": WriteFileArgs, "delete_file": DeleteFileArgs}
"""Every action kind this planner can express, with its argument model."""

ADAPTER_ACTIONS: dict[str, tuple[str, ...]] = FILE_ADAPTER_ACTIONS
"""The actions each file adapter accepts (``runtime.taskspec.offered_actions``, which also checks a
task spec against them when its run is created)."""


@dataclass(frozen=True)
class Toolset:
    """The tools offered for one adapter, and their pinned digest.

    Attributes:
        actions: the action kinds offered, in order.
        tools: the ``tools`` list sent with every request (OpenAI function-tool format).
        digest: ``sha256:<hex>`` over the canonical JSON of ``tools``: the tool-schema version.
        declared: for an adapter that declares its actions, ``kind -> model of {"target",
            "params"}``; empty for the file actions.
    """

    actions: tuple[str, ...]
    tools: list[dict[str, Any]]
    digest: str
    declared: Mapping[str, type[BaseModel]] = field(default_factory=dict)


@dataclass(frozen=True)
class DeclaredCall:
    """A validated call of an adapter-declared action: its target and params, as the model gave them."""

    kind: str
    target: str
    params: dict[str, Any]


def _inline(schema: Any, defs: Mapping[str, Any], depth: int = 0) -> Any:
    """``schema`` with every local ``$ref`` replaced by its definition (some OpenAI-compatible
    servers do not resolve ``$defs``); a self-referencing schema is refused."""
    if depth > 32:
        raise PlannerError("an adapter's action schema nests too deeply (or refers to itself)")
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return {**_inline(defs[ref.removeprefix("#/$defs/")], defs, depth + 1),
                    **_inline(rest, defs, depth + 1)}
        return {k: _inline(v, defs, depth + 1) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inline(v, defs, depth + 1) for v in schema]
    return schema


def _sorted_required(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: sorted(v) if k == "required" and isinstance(v, list) and all(isinstance(x, str) for x in v)
                else _sorted_required(v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_sorted_required(v) for v in schema]
    return schema


def _tool(name: str, model: type[BaseModel], *, sort_required: bool = False) -> dict[str, Any]:
    schema = model.model_json_schema()
    parameters = _inline(schema, schema.get("$defs", {}))
    if sort_required:
        # A declared model is built from options that may be stored with their keys reordered
        # (PostgreSQL's jsonb); the pinned tool-schema digest must not depend on that order.
        parameters = _sorted_required(parameters)
    return {"type": "function", "function": {"name": name, "description": (model.__doc__ or "").strip(),
                                             "parameters": parameters}}


def _offered(kinds: list[str], allowed: tuple[str, ...], adapter: str) -> tuple[str, ...]:
    offered = tuple(k for k in kinds if not allowed or k in allowed)
    if not offered:
        raise PlannerError(f"the policy's allowed_actions name none of adapter {adapter!r:.80}'s actions "
                           f"({', '.join(kinds)[:300]}): the model would have no tool", adapter=adapter[:80])
    return offered


def _declared_models(adapter: str, entry: str | None, options: Mapping[str, Any]) -> Mapping[str, type[BaseModel]]:
    loaded = plugin_load(group=ADAPTERS, name=adapter, entry=entry)
    models_of = getattr(loaded.factory, "action_models", None)
    if not callable(models_of):
        return {}
    try:
        validated = loaded.options(options)
    except ValidationError as exc:
        raise PlannerError(f"adapter {adapter!r:.80}'s options do not validate ({exc.error_count()} errors), so "
                           "its actions cannot be offered as tools", adapter=adapter[:80]) from None
    return dict(models_of(options=validated))


def toolset_for(adapter: str, *, entry: str | None = None, options: Mapping[str, Any] | None = None,
                allowed: tuple[str, ...] = ()) -> Toolset:
    """The tools for ``adapter``: its actions the policy allows, plus ``finish``.

    Args:
        adapter: the spec's adapter name (``"workspace"``, ``"git"``, ``"http"``, ``"sql"``, a
            plug-in's name, or ``"python"`` with ``entry``).
        entry: the adapter's ``entry`` for ``"python"``.
        options: the spec's ``[environment.options]``; a declaring adapter's models depend on them.
        allowed: the policy's ``allowed_actions`` (empty: every action is offered).

    Raises:
        PlannerError: the adapter declares no action this planner can offer, or the policy
            allows none of them.
        PluginNotFoundError / PluginLoadError: the adapter plug-in cannot be found or imported.
    """
    if adapter in ADAPTER_ACTIONS:
        actions = _offered(list(ADAPTER_ACTIONS[adapter]), allowed, adapter)
        tools = [_tool(kind, ACTION_ARGS[kind]) for kind in actions] + [_tool(FINISH, FinishArgs)]
        return Toolset(actions=actions, tools=tools, digest=digest_bytes(canonical_json(tools)))
    models = _declared_models(adapter, entry, options or {})
    if not models:
        raise PlannerError(f"the chat-tools planner cannot offer tools for adapter {adapter!r:.80}: it declares "
                           "no actions (action_models)", adapter=adapter[:80])
    actions = _offered(sorted(models), allowed, adapter)
    if FINISH in actions:
        raise PlannerError(f"adapter {adapter!r:.80} declares an action named {FINISH!r}, the planner's own tool",
                           adapter=adapter[:80])
    tools = [_tool(kind, models[kind], sort_required=True) for kind in actions] + [_tool(FINISH, FinishArgs)]
    return Toolset(actions=actions, tools=tools, digest=digest_bytes(canonical_json(tools)),
                   declared={kind: models[kind] for kind in actions})


def validate_call(toolset: Toolset, name: str, arguments: Any) -> BaseModel | DeclaredCall:
    """The validated arguments of a call to ``name``.

    Raises:
        UnknownToolError: ``name`` was not offered.
        ToolArgumentsError: ``arguments`` is not an object or fails the tool's schema (the
            error lists each failing field, never the values).
    """
    if name == FINISH:
        model: type[BaseModel] = FinishArgs
    elif name in toolset.actions:
        model = toolset.declared.get(name) or ACTION_ARGS[name]
    else:
        raise UnknownToolError(f"the model called {name!r:.80}, which was not offered", tool=name[:80])
    if not isinstance(arguments, Mapping):
        raise ToolArgumentsError("tool arguments must be a JSON object", tool=name)
    try:
        validated = model.model_validate(dict(arguments))
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors())
        raise ToolArgumentsError(f"arguments fail the {name} schema: {fields[:500]}", tool=name) from None
    if name in toolset.declared:
        # The arguments as the model gave them (strict validation coerced nothing), so the action
        # holds exactly what the recorded reply says; placeholders keep their "$secret" spelling.
        params = arguments.get("params") or {}
        if not isinstance(params, Mapping):
            raise ToolArgumentsError(f"arguments of {name} have params that are not an object", tool=name)
        return DeclaredCall(kind=name, target=str(arguments.get("target", "")), params=dict(params))
    return validated


def call_to_proposal(name: str, args: BaseModel | DeclaredCall, *, risks: Mapping[str, Risk],
                     put_blob: PutBlob) -> Action | Done:
    """The :class:`Action` (or :class:`Done`) for a validated call; content goes to ``put_blob``."""
    if isinstance(args, FinishArgs):
        return Done(reason=f"the model called finish: {args.summary}"[:500])
    risk = Risk(risks.get(name, Risk.HIGH))  # an action kind without a configured risk is high
    if isinstance(args, DeclaredCall):
        try:
            return Action(kind=args.kind, target=args.target, params=args.params, risk=risk)
        except ValidationError as exc:
            raise ToolArgumentsError(f"arguments do not make a valid {name} action: "
                                     f"{exc.errors()[0]['msg'][:200]}", tool=name) from None
    params: dict[str, Any] = {}
    if isinstance(args, WriteFileArgs):
        params = {"content": put_blob(args.content.encode("utf-8")), "executable": args.executable}
    elif not isinstance(args, DeleteFileArgs):
        raise PlannerError(f"no action for tool {name!r:.80}", tool=name[:80])
    try:
        return Action(kind=name, target=args.path, params=params, risk=risk)  # type: ignore[attr-defined]
    except ValidationError as exc:  # e.g. a target the action model refuses
        raise ToolArgumentsError(f"arguments do not make a valid {name} action: "
                                 f"{exc.errors()[0]['msg'][:200]}", tool=name) from None
