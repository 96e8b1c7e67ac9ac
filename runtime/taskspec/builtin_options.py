"""The options models of Ratchet's own plug-ins (DESIGN.md section 5.10).

Each built-in planner, adapter and verifier is registered by entry point like any third-party
plug-in and declares its options with one of these models; the task spec's ``[planner]`` and
``[verifier]`` tables (without ``kind``/``entry``) and ``[environment.options]`` are validated
with them, and every bad field is reported by its TOML path. Framework-free: nothing here
imports Django.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from runtime.core.checkpoint import Risk
from runtime.plugins.options import NoOptions
from runtime.taskspec.models import MAX_LAST_COMMITS, Ident, RiskName, Spec, unique
from runtime.taskspec.paths import RelPath, spec_path_problem


class ScriptedStep(Spec):
    """One ``[[planner.steps]]`` entry: a file step, or any action the adapter declares.

    File steps write ``content`` (UTF-8 text) to ``target`` or delete it; ``kind`` may be left
    out: it is then ``delete_file`` when ``delete = true`` and ``write_file`` otherwise. A
    **generic step** names an action of the adapter, ``action = "http_request"``, with its
    ``target`` and ``params`` as the action carries them (``kind`` is then ``"action"``); the
    task spec checks it against the adapter's declared action schema when it is loaded
    (:mod:`runtime.taskspec.planned_actions`, DESIGN.md section 5.10). The stored form always
    carries the explicit kind; a file step's stored form has no ``action``/``params`` keys.
    """

    kind: Literal["write_file", "delete_file", "action"]
    action: Ident | None = None
    # A file step's target is a safe relative path; a generic step's is whatever its adapter's
    # schema says (a URL path for http_request), so the check depends on the kind (below).
    target: Annotated[str, StringConstraints(max_length=4096)]
    content: str | None = None
    delete: bool = False
    executable: bool = False
    params: dict[str, JsonValue] | None = None
    risk: RiskName = Risk.LOW

    @model_validator(mode="before")
    @classmethod
    def _infer_kind(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            data = dict(data)
            if "kind" not in data:
                data["kind"] = ("action" if "action" in data
                                else "delete_file" if data.get("delete") is True else "write_file")
            if data["kind"] == "delete_file" and "delete" not in data:
                data["delete"] = True
        return data

    @field_validator("target")
    @classmethod
    def _file_target(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("kind") in ("write_file", "delete_file"):
            problem = spec_path_problem(value)
            if problem:
                raise ValueError(f"{problem}: {value!r:.200}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ScriptedStep:
        if self.kind == "action":
            if self.action is None:
                raise ValueError("a generic step names its action (action = \"http_request\")")
            if self.content is not None or self.delete or self.executable:
                raise ValueError("a generic step takes params, not content, delete or executable")
            return self
        if self.action is not None or self.params is not None:
            raise ValueError(f"a {self.kind} step takes no action or params")
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

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.kind == "action":
            for name in ("content", "delete", "executable"):
                data.pop(name, None)
            data["params"] = data.get("params") or {}
        else:  # file steps keep the stored form (and scenario fingerprint) they always had
            data.pop("action", None)
            data.pop("params", None)
        return data


class ScriptedPlannerSpec(Spec):
    """Options of ``[planner] kind = "scripted"``: the listed steps, proposed in order."""

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


class GitHistoryPlannerSpec(Spec):
    """Options of ``[planner] kind = "git-history"``: replay ``range`` of ``source``.

    ``range`` is ``"A..B"`` (the first-parent commits after A up to B) or ``"last:N"`` (the
    last N first-parent commits of the source's HEAD, resolved once at run creation).
    ``risk`` is the risk given to every commit action.
    """

    source: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    range: Annotated[str, StringConstraints(max_length=500), AfterValidator(_check_range)]
    risk: RiskName = Risk.LOW


class TreeEqualsSourceVerifier(NoOptions):
    """Options of ``kind = "tree-equals-source"`` (none): passes when the target's HEAD tree
    equals the source tip's tree and the work tree is clean."""


class FilesEqualVerifier(Spec):
    """Options of ``kind = "files-equal"``: each ``files`` path holds exactly the given UTF-8
    text and ``absent`` paths do not exist."""

    files: dict[RelPath, str] = Field(default_factory=dict)
    absent: Annotated[list[RelPath], AfterValidator(unique)] = Field(default_factory=list)


class AlwaysVerifier(NoOptions):
    """Options of ``kind = "always"`` (none): always passes; for demos and tests only."""
