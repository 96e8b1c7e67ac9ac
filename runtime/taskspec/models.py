"""The task spec models: the validated form of a task TOML file (DESIGN.md section 3).

A :class:`TaskSpec` fixes a run's task, version combination, policy, environment, planner and
verifier. It is validated once, when a run is created, stored with the run as
``spec.model_dump(mode="json")`` and rebuilt on resume with :meth:`TaskSpec.from_json`, so a
resume never re-reads a TOML file that may have changed since. Framework-free: nothing here
imports Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationError,
    model_serializer,
    model_validator,
)

from runtime.core.checkpoint import BudgetLimits, Risk, Scope, VersionSet
from runtime.core.nesting import MAX_NESTING_DEPTH, value_depth
from runtime.errors import PluginError, PluginLoadError, PluginNotFoundError, TaskSpecError
from runtime.plugins.options import StrictOptions
from runtime.plugins.registry import ADAPTERS, ENTRY_RE, PLANNERS, PYTHON_KIND, VERIFIERS, LoadedPlugin, plugin_load
from runtime.plugins.validation_errors import error_lines, render_lines
from runtime.taskspec.paths import GlobPattern
from runtime.taskspec.planned_actions import planned_action_lines

TASK_SPEC_SCHEMA_VERSION = 1
"""Version of the task spec format this code reads; hashed into every scenario fingerprint."""

MAX_LAST_COMMITS = 5000
"""Upper bound for ``range = "last:N"``: the commit list is kept in every checkpoint."""

Ident = Annotated[str, StringConstraints(min_length=1, max_length=200)]
RiskName = Annotated[Risk, Field(strict=False)]
"""A risk level; TOML gives the string ("low", "medium", "high"), the model holds the enum."""


class Spec(StrictOptions):
    """Base of the task spec's models: unknown fields rejected, strict types (a TOML string is
    never taken as a number), frozen; the same rules as every plug-in's options."""


def unique(values: list[Any]) -> list[Any]:
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{value!r:.100} is listed twice")
        seen.add(value)
    return values


class TaskSection(Spec):
    """``[task]``: what the run is for."""

    id: Ident
    version: Ident
    tenant: Ident = "default"


class VersionsSection(Spec):
    """``[versions]``: the version combination (DESIGN.md section 3). ``inputs`` maps an input
    name (document, code, resource) to its version, SHA or ETag."""

    model: Ident = "none"
    prompt: Ident = "none"
    rules: Ident = "none"
    tool_schema: Ident = "none"
    inputs: dict[Ident, Annotated[str, StringConstraints(max_length=4096)]] = Field(
        default_factory=dict
    )


NonNegInt = Annotated[int, Field(ge=0)]


class BudgetsSection(Spec):
    """``[policy.budgets]``. Units: counts, seconds of wall time, micro-units of cost."""

    proposals: NonNegInt
    steps: NonNegInt
    wall_seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    cost_micros: NonNegInt = 0


class PolicySection(Spec):
    """``[policy]``: the allowed scope and the budgets.

    ``allowed_actions`` lists action kinds; ``allowed_paths`` lists glob patterns (see
    :func:`glob_match`); ``approval_risks`` lists the risks whose actions need a human approval.
    """

    id: Ident
    version: Ident
    allowed_actions: Annotated[list[Ident], AfterValidator(unique)]
    allowed_paths: Annotated[list[GlobPattern], AfterValidator(unique)]
    permissions: Annotated[list[Ident], AfterValidator(unique)] = Field(default_factory=list)
    approval_risks: Annotated[list[RiskName], AfterValidator(unique)] = Field(
        default_factory=list
    )
    budgets: BudgetsSection


EntryRef = Annotated[str, StringConstraints(max_length=300, pattern=ENTRY_RE.pattern)]
"""A dotted path to a plug-in, ``"package.module:Attr"``."""


class EnvironmentSection(Spec):
    """``[environment]``: which adapter acts on which target.

    ``adapter`` names an adapter plug-in (``"workspace"``, ``"git"``, one registered by an
    installed package) or is ``"python"`` with ``entry = "module:Attr"``; ``[environment.options]``
    holds the adapter's own options. ``target`` is a path; in a TOML file it is relative to the
    file's directory and is made absolute by :func:`load_task_spec`. ``setup = "clone-at-base"``
    asks the runner to create the target as a fresh clone of the git-history planner's source.
    """

    adapter: Ident
    entry: EntryRef | None = None
    options: dict[str, JsonValue] = Field(default_factory=dict)
    target: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    setup: Literal["none", "clone-at-base"] = "none"

    @model_validator(mode="after")
    def _entry_with_python(self) -> EnvironmentSection:
        if (self.adapter == PYTHON_KIND) != (self.entry is not None):
            raise ValueError('entry = "module:Attr" is given exactly when adapter = "python"')
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("entry") is None:
            data.pop("entry", None)  # specs without plug-ins keep their stored form and fingerprint
        if not data.get("options"):
            data.pop("options", None)
        return data


class PluginSection(Spec):
    """``[planner]`` or ``[verifier]``: a plug-in by ``kind`` and its own options.

    ``kind`` names a plug-in registered by entry point, or is ``"python"`` with ``entry =
    "module:Attr"``. Every other key of the table is an option of the plug-in, validated by the
    options model it declares (:func:`validate_task_spec`); the stored form holds the options as
    that model dumped them.
    """

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    kind: Ident
    entry: EntryRef | None = None

    @model_validator(mode="after")
    def _entry_with_python(self) -> PluginSection:
        if (self.kind == PYTHON_KIND) != (self.entry is not None):
            raise ValueError('entry = "module:Attr" is given exactly when kind = "python"')
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("entry") is None:
            data.pop("entry", None)  # specs without plug-in paths keep their stored form
        return data

    def options_json(self) -> dict[str, Any]:
        """The plug-in's options: every key of the table but ``kind`` and ``entry``."""
        return dict(self.model_extra or {})


class TaskSpec(Spec):
    """A validated task spec: task, policy, environment, planner, verifier (DESIGN.md sections 3, 5.10).

    Build one with :func:`load_task_spec` (from TOML) or :meth:`from_json` (from the copy stored
    with a run); both validate every plug-in's options (:func:`validate_task_spec`).
    ``model_dump(mode="json")`` is the stored form.
    """

    schema_version: Literal[1] = TASK_SPEC_SCHEMA_VERSION
    task: TaskSection
    versions: VersionsSection = Field(default_factory=VersionsSection)
    policy: PolicySection
    environment: EnvironmentSection
    planner: PluginSection
    verifier: PluginSection

    @model_validator(mode="after")
    def _cross_field(self) -> TaskSpec:
        problems: list[str] = []
        replay = self.planner.kind == "git-history"
        if replay and self.environment.adapter != "git":
            problems.append(
                "environment.adapter: the git-history planner proposes commit actions, "
                "which need adapter = \"git\""
            )
        if self.environment.setup == "clone-at-base" and not replay:
            problems.append("environment.setup: clone-at-base needs a git-history planner")
        if self.verifier.kind == "tree-equals-source" and not replay:
            problems.append(
                "verifier.kind: tree-equals-source compares with the git-history planner's "
                "source; use another verifier"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskSpec:
        """Rebuild a spec from its stored ``model_dump(mode="json")`` form (resume by run id).

        Raises:
            TaskSpecError: the stored copy no longer validates, naming every bad field.
            PluginNotFoundError / PluginLoadError: a plug-in it names is gone or cannot be imported.
        """
        return validate_task_spec(data, source="stored task spec")

    # -- views used by the engine when it creates a run ------------------------------------------

    def resolve_target(self, base_dir: Path | str | None = None) -> Path:
        """``environment.target`` as a path; a relative one is taken against ``base_dir``."""
        target = Path(self.environment.target)
        if not target.is_absolute() and base_dir is not None:
            target = Path(base_dir) / target
        return target

    def budget_limits(self) -> BudgetLimits:
        """The checkpoint's :class:`BudgetLimits` from ``[policy.budgets]``."""
        b = self.policy.budgets
        return BudgetLimits(
            proposals=b.proposals,
            steps=b.steps,
            wall_seconds=float(b.wall_seconds),
            cost_micros=b.cost_micros,
        )

    def version_set(self) -> VersionSet:
        """The checkpoint's :class:`VersionSet` from ``[versions]``."""
        v = self.versions
        return VersionSet(
            model=v.model, prompt=v.prompt, rules=v.rules, tool_schema=v.tool_schema,
            inputs=dict(v.inputs),
        )

    def scope(self, *, principal: str) -> Scope:
        """The checkpoint's :class:`Scope` for an agent acting as ``principal``."""
        p = self.policy
        return Scope(
            allowed_actions=list(p.allowed_actions),
            allowed_paths=list(p.allowed_paths),
            permissions=list(p.permissions),
            approval_risks=[Risk(r) for r in p.approval_risks],
            principal=principal,
            policy_version=p.version,
        )


PLUGIN_SECTIONS = (("planner", "kind", PLANNERS), ("environment", "adapter", ADAPTERS), ("verifier", "kind", VERIFIERS))
"""Where a spec names its plug-ins: ``(table, key holding the name, entry-point group)``."""


def spec_plugin(spec: TaskSpec, table: str) -> tuple[LoadedPlugin, BaseModel]:
    """The plug-in ``table`` (``"planner"``, ``"environment"``, ``"verifier"``) names, and its
    validated options.

    Raises:
        PluginNotFoundError / PluginLoadError: see :func:`runtime.plugins.registry.plugin_load`.
        TaskSpecError: the options no longer validate (the plug-in changed since the spec did).
    """
    prefix: tuple[str, ...]
    data: Mapping[str, Any]
    if table == "environment":
        env = spec.environment
        loaded = plugin_load(group=ADAPTERS, name=env.adapter, entry=env.entry)
        data, prefix = env.options, ("environment", "options")
    else:
        section: PluginSection = getattr(spec, table)
        group = PLANNERS if table == "planner" else VERIFIERS
        loaded = plugin_load(group=group, name=section.kind, entry=section.entry)
        data, prefix = section.options_json(), (table,)
    try:
        return loaded, loaded.options(data)
    except ValidationError as exc:
        raise TaskSpecError(render_lines("task spec", error_lines(exc, prefix=prefix))) from None


def _section_options(raw: Mapping[str, Any], table: str, key: str, group: str, lines: list[str],
                     failures: list[PluginError]) -> dict[str, Any] | None:
    section = raw.get(table)
    if not isinstance(section, Mapping) or not isinstance(section.get(key), str):
        return None  # the first pass reports the missing table or kind
    entry = section.get("entry")
    prefix: tuple[str, ...]
    try:
        loaded = plugin_load(group=group, name=section[key], entry=entry if isinstance(entry, str) else None)
    except (PluginNotFoundError, PluginLoadError) as exc:
        failures.append(exc)
        lines.append(f"{table}.{'entry' if section[key] == PYTHON_KIND else key}: {exc.message}")
        return None
    if table == "environment":
        data, prefix = section.get("options", {}), (table, "options")
        if not isinstance(data, Mapping):
            return None  # the first pass reports a non-table
    else:
        data, prefix = {k: v for k, v in section.items() if k not in ("kind", "entry")}, (table,)
    try:
        return loaded.options(data).model_dump(mode="json")
    except ValidationError as exc:
        lines.extend(error_lines(exc, prefix=prefix))
        return None


def validate_task_spec(raw: Mapping[str, Any], *, source: str, file: str | None = None) -> TaskSpec:
    """Validate a task spec and each plug-in's options, reporting every bad field at once.

    The spec's own fields are checked first; then each plug-in named by ``planner.kind``,
    ``environment.adapter`` and ``verifier.kind`` is found (DESIGN.md section 5.10) and its
    options are validated by the model it declares, so an option's error names its TOML path
    (``planner.steps[0].target``, ``environment.options.root``). The stored form holds each
    plug-in's options as its model dumped them.

    Args:
        raw: the TOML table (or the stored JSON form).
        source: what is validated, for the message (``"task spec replay.toml"``).
        file: the file name, kept in the error's context.

    Raises:
        PluginLoadError: a plug-in's code cannot be imported (the message lists every problem).
        PluginNotFoundError: a plug-in name is not installed (the message lists every problem).
        TaskSpecError: any other field is invalid, or ``raw`` nests more than
            ``MAX_NESTING_DEPTH`` levels deep (refused before any validator walks it
            recursively; DESIGN.md section 2.2).
    """
    if value_depth(raw) > MAX_NESTING_DEPTH:
        raise TaskSpecError(f"{source} nests more than {MAX_NESTING_DEPTH} levels deep", file=file)
    lines: list[str] = []
    failures: list[PluginError] = []
    normal = {k: v for k, v in raw.items()}
    for table, key, group in PLUGIN_SECTIONS:
        options = _section_options(raw, table, key, group, lines, failures)
        if options is None:
            continue
        section = dict(raw[table])
        if table == "environment":
            section["options"] = options
        else:
            section = {k: v for k, v in section.items() if k in ("kind", "entry")} | options
        normal[table] = section
    try:
        spec = TaskSpec.model_validate(normal)
    except ValidationError as exc:
        lines[:0] = error_lines(exc)
        spec = None
    if spec is not None and not lines:  # a planner's known actions fit the adapter's schemas (5.10)
        (planner, p_opts), (adapter, a_opts) = spec_plugin(spec, "planner"), spec_plugin(spec, "environment")
        lines = planned_action_lines(planner=planner, planner_options=p_opts, adapter=adapter, adapter_options=a_opts)
    if spec is None or lines:
        error = next((type(f) for f in failures if isinstance(f, PluginLoadError)),
                     PluginNotFoundError if failures else TaskSpecError)
        raise error(render_lines(source, lines), file=file)
    return spec
