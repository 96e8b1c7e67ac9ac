"""Task specs: the TOML file that fixes a run's task, policy, environment, planner and verifier.

A task spec is validated once, when a run is created, with a :class:`TaskSpecError` that names
every bad field by its TOML path (``policy.budgets.steps: Input should be greater than or equal
to 0``). The validated spec is stored with the run as ``spec.model_dump(mode="json")`` and rebuilt
on resume with :meth:`TaskSpec.from_json`, so a resume never re-reads a TOML file that may have
changed since.

The policy part of the spec is enforced here too: :func:`policy_check` rejects an action whose
kind is not allowlisted or which touches a path outside ``allowed_paths``, and
:func:`needs_approval` says whether an action's risk needs a human approval (DESIGN.md section 6).

Framework-free: nothing here imports Django.

Example::

    schema_version = 1            # optional, default 1

    [task]
    id = "replay-history"
    version = "1"

    [policy]
    id = "replay"
    version = "1"
    allowed_actions = ["commit"]
    allowed_paths = ["**"]
    approval_risks = ["high"]
    [policy.budgets]
    proposals = 40
    steps = 40
    wall_seconds = 600
    cost_micros = 0

    [environment]
    adapter = "git"
    target = "../var/replay"      # relative to this file's directory
    setup = "clone-at-base"

    [planner]
    kind = "git-history"
    source = "../.."
    range = "last:30"

    [verifier]
    kind = "tree-equals-source"
"""

from __future__ import annotations

import functools
import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from runtime.core.canonical import DigestKind, digest
from runtime.core.checkpoint import Action, BudgetLimits, Risk, Scope, VersionSet
from runtime.errors import PolicyViolationError, TaskSpecError

TASK_SPEC_SCHEMA_VERSION = 1
"""Version of the task spec format this code reads; hashed into every scenario fingerprint."""

SCENARIO_FINGERPRINT_VERSION = 1
"""Version of the scenario fingerprint layout; bump it when :func:`scenario_fingerprint` changes."""

FILE_ACTION_KINDS = frozenset({"write_file", "delete_file", "commit"})
"""Action kinds whose paths :func:`policy_check` checks against ``allowed_paths``."""

SHIPPED_TASKS_DIR = Path(__file__).resolve().parent / "task_specs"
"""Where the example task files shipped with the runtime live (``replay_history.toml``, ...)."""

MAX_LAST_COMMITS = 5000
"""Upper bound for ``range = "last:N"``: the commit list is kept in every checkpoint."""

Ident = Annotated[str, StringConstraints(min_length=1, max_length=200)]
RiskName = Annotated[Risk, Field(strict=False)]
"""A risk level; TOML gives the string ("low", "medium", "high"), the model holds the enum."""


# --- paths and globs ------------------------------------------------------------------------


def relative_path_problem(path: str) -> str | None:
    """Why ``path`` is not a safe workspace-relative path, or None if it is.

    A safe path is non-empty, relative, uses ``/`` separators with no empty, ``.`` or ``..``
    segments, has no NUL byte, and never enters a ``.git`` directory (any case: the git
    metadata of a target is not something a plan may write).
    """
    if not path:
        return "path is empty"
    if "\x00" in path:
        return "path contains a NUL byte"
    if path.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", path):
        return "path must be relative to the environment target"
    segments = path.split("/")
    if any(s in ("", ".", "..") for s in segments):
        return "path has an empty, '.' or '..' segment"
    if any(s.lower() == ".git" for s in segments):
        return "path enters a .git directory"
    return None


def _check_relative_path(value: str) -> str:
    problem = relative_path_problem(value)
    if problem:
        raise ValueError(f"{problem}: {value!r:.200}")
    return value


def _check_glob(value: str) -> str:
    if not value:
        raise ValueError("glob pattern is empty")
    if value.startswith("/"):
        raise ValueError(f"glob pattern must be relative: {value!r:.200}")
    if any(s in (".", "..") for s in value.split("/")):
        raise ValueError(f"glob pattern has a '.' or '..' segment: {value!r:.200}")
    return value


RelPath = Annotated[str, StringConstraints(max_length=4096), AfterValidator(_check_relative_path)]
GlobPattern = Annotated[str, StringConstraints(max_length=4096), AfterValidator(_check_glob)]


@functools.lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**", i):
            # "**/" may match zero directories, so "**/*.py" matches "a.py" as well as "x/a.py".
            if pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
            else:
                out.append(".*")
                i += 2
            continue
        char = pattern[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            start = i + 1
            negate = pattern[start : start + 1] == "!"
            if negate:
                start += 1
            # A "]" right after "[" or "[!" is a literal member, as in fnmatch.
            end = pattern.find("]", start + 1 if pattern[start : start + 1] == "]" else start)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = pattern[start:end].replace("\\", "\\\\").replace("[", "\\[")
                body = body.replace("^", "\\^").replace("]", "\\]")
                # A negated class must still never match a separator.
                out.append(("[^/" if negate else "[") + body + "]")
                i = end + 1
                continue
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def glob_match(pattern: str, path: str) -> bool:
    """Whether ``path`` matches the fnmatch-style ``pattern``, case-sensitively.

    ``*`` and ``?`` never cross a ``/``; ``**`` matches any number of segments (``**/`` also
    zero), ``[abc]``/``[!abc]`` are character classes. ``"**"`` matches every path,
    ``"src/**"`` everything under ``src/``, ``"**/*.md"`` every Markdown file at any depth.
    """
    return _glob_regex(pattern).match(path) is not None


def path_allowed(path: str, patterns: Iterable[str]) -> bool:
    """Whether ``path`` is safe (see :func:`relative_path_problem`) and matches any pattern."""
    return relative_path_problem(path) is None and any(glob_match(p, path) for p in patterns)


# --- the spec models ------------------------------------------------------------------------


class _Spec(BaseModel):
    """Base: unknown fields rejected, strict types (a TOML string is never taken as a number)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _unique(values: list[Any]) -> list[Any]:
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{value!r:.100} is listed twice")
        seen.add(value)
    return values


class TaskSection(_Spec):
    """``[task]``: what the run is for."""

    id: Ident
    version: Ident
    tenant: Ident = "default"


class VersionsSection(_Spec):
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


class BudgetsSection(_Spec):
    """``[policy.budgets]``. Units: counts, seconds of wall time, micro-units of cost."""

    proposals: NonNegInt
    steps: NonNegInt
    wall_seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    cost_micros: NonNegInt = 0


class PolicySection(_Spec):
    """``[policy]``: the allowed scope and the budgets.

    ``allowed_actions`` lists action kinds; ``allowed_paths`` lists glob patterns (see
    :func:`glob_match`); ``approval_risks`` lists the risks whose actions need a human approval.
    """

    id: Ident
    version: Ident
    allowed_actions: Annotated[list[Ident], AfterValidator(_unique)]
    allowed_paths: Annotated[list[GlobPattern], AfterValidator(_unique)]
    permissions: Annotated[list[Ident], AfterValidator(_unique)] = Field(default_factory=list)
    approval_risks: Annotated[list[RiskName], AfterValidator(_unique)] = Field(
        default_factory=list
    )
    budgets: BudgetsSection


class EnvironmentSection(_Spec):
    """``[environment]``: which adapter acts on which target.

    ``target`` is a path; in a TOML file it is relative to the file's directory and is made
    absolute by :func:`load_task_spec`. ``setup = "clone-at-base"`` asks the runner to create
    the target as a fresh clone of the git-history planner's source at the range's base.
    """

    adapter: Literal["workspace", "git"]
    target: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    setup: Literal["none", "clone-at-base"] = "none"


class ScriptedStep(_Spec):
    """One ``[[planner.steps]]`` entry: write ``content`` (UTF-8 text) to ``target``, or delete it.

    ``kind`` may be left out: it is then ``delete_file`` when ``delete = true`` and
    ``write_file`` otherwise. The stored form always carries the explicit kind.
    """

    kind: Literal["write_file", "delete_file"]
    target: RelPath
    content: str | None = None
    delete: bool = False
    executable: bool = False
    risk: RiskName = Risk.LOW

    @model_validator(mode="before")
    @classmethod
    def _infer_kind(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            data = dict(data)
            if "kind" not in data:
                data["kind"] = "delete_file" if data.get("delete") is True else "write_file"
            if data["kind"] == "delete_file" and "delete" not in data:
                data["delete"] = True
        return data

    @model_validator(mode="after")
    def _consistent(self) -> ScriptedStep:
        if self.kind == "write_file":
            if self.delete:
                raise ValueError("a write_file step cannot also set delete = true")
            if self.content is None:
                raise ValueError("a write_file step needs content (text)")
        else:
            if not self.delete:
                raise ValueError("a delete_file step cannot set delete = false")
            if self.content is not None or self.executable:
                raise ValueError("a delete_file step takes no content or executable flag")
        return self


class ScriptedPlannerSpec(_Spec):
    """``[planner] kind = "scripted"``: the listed steps, proposed in order."""

    kind: Literal["scripted"]
    steps: Annotated[list[ScriptedStep], Field(min_length=1)]


_REV_RE = re.compile(r"^[^\s\-.][^\s]*$")


def _check_range(value: str) -> str:
    last = re.fullmatch(r"last:(\d+)", value)
    if last:
        count = int(last.group(1))
        if not 1 <= count <= MAX_LAST_COMMITS:
            raise ValueError(f"last:N needs 1 <= N <= {MAX_LAST_COMMITS}, got {count}")
        return value
    if value.startswith("last:"):
        raise ValueError(f"range {value!r:.100} must be last:N with N a positive integer")
    if "..." in value or value.count("..") != 1:
        raise ValueError(f"range {value!r:.100} must be 'A..B' or 'last:N'")
    base, tip = value.split("..")
    for name, rev in (("base", base), ("tip", tip)):
        # A revision starting with '-' would be read by git as an option.
        if not _REV_RE.match(rev):
            raise ValueError(f"range {value!r:.100} has an empty or malformed {name} revision")
    return value


class GitHistoryPlannerSpec(_Spec):
    """``[planner] kind = "git-history"``: replay ``range`` of the ``source`` repository.

    ``range`` is ``"A..B"`` (the first-parent commits after A up to B) or ``"last:N"`` (the
    last N first-parent commits of the source's HEAD, resolved once at run creation).
    ``risk`` is the risk given to every commit action.
    """

    kind: Literal["git-history"]
    source: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    range: Annotated[str, StringConstraints(max_length=500), AfterValidator(_check_range)]
    risk: RiskName = Risk.LOW


class TreeEqualsSourceVerifier(_Spec):
    """Passes when the target's HEAD tree equals the source tip's tree and the work tree is
    clean."""

    kind: Literal["tree-equals-source"]


class FilesEqualVerifier(_Spec):
    """Passes when each ``files`` path holds exactly the given UTF-8 text and ``absent`` paths do
    not exist."""

    kind: Literal["files-equal"]
    files: dict[RelPath, str] = Field(default_factory=dict)
    absent: Annotated[list[RelPath], AfterValidator(_unique)] = Field(default_factory=list)


class AlwaysVerifier(_Spec):
    """Always passes; for demos and tests only."""

    kind: Literal["always"]


PlannerSpec = Annotated[ScriptedPlannerSpec | GitHistoryPlannerSpec, Field(discriminator="kind")]
VerifierSpec = Annotated[
    TreeEqualsSourceVerifier | FilesEqualVerifier | AlwaysVerifier, Field(discriminator="kind")
]
_UNION_TAGS = {
    "planner": {"scripted", "git-history"},
    "verifier": {"tree-equals-source", "files-equal", "always"},
}


class TaskSpec(_Spec):
    """A validated task spec (issue "exactly-once actions", part 1).

    Build one with :func:`load_task_spec` (from TOML) or :meth:`from_json` (from the copy stored
    with a run). ``model_dump(mode="json")`` is the stored form.
    """

    schema_version: Literal[1] = TASK_SPEC_SCHEMA_VERSION
    task: TaskSection
    versions: VersionsSection = Field(default_factory=VersionsSection)
    policy: PolicySection
    environment: EnvironmentSection
    planner: PlannerSpec
    verifier: VerifierSpec

    @model_validator(mode="after")
    def _cross_field(self) -> TaskSpec:
        problems: list[str] = []
        replay = isinstance(self.planner, GitHistoryPlannerSpec)
        if replay and self.environment.adapter != "git":
            problems.append(
                "environment.adapter: the git-history planner proposes commit actions, "
                "which need adapter = \"git\""
            )
        if self.environment.setup == "clone-at-base" and not replay:
            problems.append("environment.setup: clone-at-base needs a git-history planner")
        if isinstance(self.verifier, TreeEqualsSourceVerifier) and not replay:
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
        """
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise TaskSpecError(_render_errors("stored task spec", exc)) from None

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


# --- loading --------------------------------------------------------------------------------


_BARE_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _render_loc(loc: tuple[int | str, ...]) -> str:
    parts = list(loc)
    # Drop the discriminator tag pydantic inserts ("planner.git-history.range" -> "planner.range").
    if len(parts) >= 2 and parts[0] in _UNION_TAGS and parts[1] in _UNION_TAGS[str(parts[0])]:
        del parts[1]
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            continue  # pydantic's marker for "the dict key itself"; the message says which
        elif _BARE_KEY_RE.match(part):
            out += ("." if out else "") + part
        else:
            out += "[" + json.dumps(part, ensure_ascii=False) + "]"  # a table key like "a/b.md"
    return out


def _render_errors(source: str, exc: ValidationError) -> str:
    lines: list[str] = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = err["loc"]
        kind = err["type"]
        msg = err["msg"].removeprefix("Value error, ")
        if kind == "extra_forbidden":
            msg = "unknown field (not part of the task spec)"
        elif kind == "union_tag_invalid":
            expected = err.get("ctx", {}).get("expected_tags", "")
            tag = err.get("ctx", {}).get("tag", "")
            loc = (*loc, "kind")
            msg = f"unknown kind {tag!r}; expected one of {expected}"
        elif kind == "union_tag_not_found":
            loc = (*loc, "kind")
            msg = "Field required"
        where = _render_loc(tuple(loc))
        lines.append(f"{where}: {msg}" if where else msg)
    return f"{source} is invalid:\n  - " + "\n  - ".join(lines)


def _absolutise(raw: dict[str, Any], base_dir: Path) -> None:
    """Make the TOML's relative paths absolute against the file's directory, in place."""

    def fix(table: Any, key: str) -> None:
        if isinstance(table, dict) and isinstance(table.get(key), str) and table[key]:
            value = os.path.expanduser(table[key])
            table[key] = os.path.normpath(os.path.join(base_dir, value))

    fix(raw.get("environment"), "target")
    planner = raw.get("planner")
    if isinstance(planner, dict) and planner.get("kind") == "git-history":
        fix(planner, "source")


def load_task_spec(path: str | Path) -> TaskSpec:
    """Read and validate a task spec TOML file.

    Relative ``environment.target`` and ``planner.source`` paths are resolved against the file's
    directory, so the returned spec (and its stored JSON form) holds absolute paths.

    Args:
        path: the TOML file.

    Raises:
        TaskSpecError: the file cannot be read, is not TOML (message gives line and column), or
            fails validation (message names every bad field by TOML path and the file name).
    """
    path = Path(path)
    name = path.name
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise TaskSpecError(f"task spec {name} cannot be read: {exc.strerror}", file=name) from None
    except UnicodeDecodeError:
        raise TaskSpecError(f"task spec {name} is not UTF-8 text", file=name) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends with "(at line L, column C)".
        raise TaskSpecError(f"task spec {name} is not valid TOML: {exc}", file=name) from None
    _absolutise(raw, path.absolute().parent)
    try:
        return TaskSpec.model_validate(raw)
    except ValidationError as exc:
        raise TaskSpecError(_render_errors(f"task spec {name}", exc), file=name) from None


# --- scenario fingerprint -------------------------------------------------------------------


class ObservedInitialState(Protocol):
    """What :func:`scenario_fingerprint` needs of the first observation (an ``EnvironmentRef`` or
    an adapter ``Observation``)."""

    instance_id: str
    version: str
    state_fingerprint: str


def scenario_fingerprint(spec: TaskSpec, initial: ObservedInitialState) -> str:
    """Typed digest (``DigestKind.SCENARIO``) of the fixed scenario (DESIGN.md section 3).

    Covers the schema versions, task id/version/tenant, the whole policy (id, version,
    permissions, allowlists, approval risks, budgets), the environment (adapter, target, setup),
    the planner, the verifier expectation, and the observed initial state (instance id, version,
    state fingerprint). Any change gives another fingerprint, so a resume under a changed scenario
    is refused with ``ScenarioMismatchError``.

    ``[versions]`` is deliberately left out: the version combination is checked on its own
    (``VersionSet``) so that a versioned migrator can allow a resume under a new combination,
    which a scenario mismatch would make impossible.

    Args:
        spec: the validated task spec.
        initial: the observation taken before the first proposal.

    Returns:
        ``"sha256:" + 64 hex``.
    """
    body = spec.model_dump(mode="json", exclude={"versions"})
    return digest(
        DigestKind.SCENARIO,
        {
            "fingerprint_version": SCENARIO_FINGERPRINT_VERSION,
            "spec": body,
            "initial": {
                "instance_id": initial.instance_id,
                "version": initial.version,
                "state_fingerprint": initial.state_fingerprint,
            },
        },
    )


# --- policy ---------------------------------------------------------------------------------

PolicyScope = TaskSpec | PolicySection | Scope


def _allowlists(scope: PolicyScope) -> tuple[list[str], list[str]]:
    policy = scope.policy if isinstance(scope, TaskSpec) else scope
    return list(policy.allowed_actions), list(policy.allowed_paths)


def action_paths(action: Action) -> list[str]:
    """The workspace paths a file action touches: the target, or every change of a commit.

    Raises:
        PolicyViolationError: a commit's ``changes`` is not a list of ``{"op", "path"}`` objects.
    """
    if action.kind in ("write_file", "delete_file"):
        return [action.target]
    if action.kind != "commit":
        return []
    changes = action.params.get("changes")
    if not isinstance(changes, list):
        raise PolicyViolationError("commit action has no list of changes", action_kind="commit")
    paths: list[str] = []
    for index, change in enumerate(changes):
        path = change.get("path") if isinstance(change, dict) else None
        if not isinstance(path, str):
            raise PolicyViolationError(
                f"commit change {index} has no path", action_kind="commit"
            )
        paths.append(path)
    if action.target:
        paths.append(action.target)
    return paths


def policy_check(scope: PolicyScope, action: Action, *, run_id: str | None = None) -> None:
    """Reject an action outside the allowed scope (DESIGN.md section 3, allowed scope).

    The kind must be in ``allowed_actions``. For file actions (``write_file``, ``delete_file``,
    ``commit``) every path touched -- each change of a commit -- must be a safe relative path
    (no ``..``, not absolute, not inside ``.git``) matching one of ``allowed_paths``. Other
    kinds (a future browser or API adapter) are checked by kind only.

    Args:
        scope: a :class:`TaskSpec`, its ``policy`` section, or the checkpoint's ``Scope``.
        action: the proposed action.
        run_id: named in the error, when known.

    Raises:
        PolicyViolationError: naming the action kind and the first offending path.
    """
    allowed_actions, allowed_paths = _allowlists(scope)
    if action.kind not in allowed_actions:
        raise PolicyViolationError(
            f"action kind {action.kind!r} is not in the policy's allowed_actions",
            action_kind=action.kind, run_id=run_id,
        )
    if action.kind not in FILE_ACTION_KINDS:
        return
    for path in action_paths(action):
        problem = relative_path_problem(path)
        if problem:
            raise PolicyViolationError(
                f"{action.kind} touches an unsafe path: {problem}",
                action_kind=action.kind, path=repr(path[:200]), run_id=run_id,
            )
        if not any(glob_match(p, path) for p in allowed_paths):
            raise PolicyViolationError(
                f"{action.kind} touches a path outside the policy's allowed_paths",
                action_kind=action.kind, path=repr(path[:200]), run_id=run_id,
            )


def needs_approval(scope: PolicyScope, action: Action) -> bool:
    """Whether ``action`` needs a human approval: its risk is in ``approval_risks`` (section 6)."""
    policy = scope.policy if isinstance(scope, TaskSpec) else scope
    return str(action.risk) in {str(r) for r in policy.approval_risks}
