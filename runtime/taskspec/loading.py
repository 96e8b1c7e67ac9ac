"""Loading a task spec from its TOML file (DESIGN.md section 3).

A file that cannot be read, is not TOML or does not validate raises one :class:`TaskSpecError`
naming every bad field by its TOML path. Relative paths in the file are made absolute against
its directory, so the stored spec never depends on the working directory. Framework-free:
nothing here imports Django.

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

import os
import tomllib
from pathlib import Path
from typing import Any

from runtime.core.nesting import MAX_NESTING_DEPTH
from runtime.errors import TaskSpecError, TaskSpecUnreadableError
from runtime.taskspec.models import TaskSpec, validate_task_spec
from runtime.taskspec.offered_actions import offered_actions_check

SHIPPED_TASKS_DIR = Path(__file__).resolve().parents[1] / "task_specs"
"""Where the example task files shipped with the runtime live (``replay_history.toml``, ...)."""


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
        TaskSpecError: the file cannot be read, is not TOML (message gives line and column),
            nests arrays or inline tables more than ``MAX_NESTING_DEPTH`` (64) levels deep
            (DESIGN.md section 2.2), names a file path the adapter would refuse, or fails
            validation (message names every bad field by TOML path and the file name),
            plug-in options included; ``PluginNotFoundError`` / ``PluginLoadError`` (both
            ``TaskSpecError``) when a named plug-in is not installed or cannot be imported;
            ``PolicyActionsError`` (a ``TaskSpecError``) when a planner that offers the
            adapter's actions (chat-tools, external) would offer none of them.
    """
    path = Path(path)
    name = path.name
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        where = "" if path.is_absolute() else f" (relative to {Path.cwd()})"
        raise TaskSpecUnreadableError(f"task spec {path} cannot be read{where}: {exc.strerror}", file=name) from None
    except UnicodeDecodeError:
        raise TaskSpecError(f"task spec {name} is not UTF-8 text", file=name) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends with "(at line L, column C)".
        raise TaskSpecError(f"task spec {name} is not valid TOML: {exc}", file=name) from None
    except RecursionError:
        # tomllib parses nested arrays and inline tables recursively; validate_task_spec
        # refuses anything deeper than the limit that did parse, with the same message.
        raise TaskSpecError(f"task spec {name} nests more than {MAX_NESTING_DEPTH} levels deep",
                            file=name) from None
    except ValueError as exc:
        # Python refuses to convert an integer literal of more than 4,300 digits
        # (sys.get_int_max_str_digits) and tomllib lets that ValueError through untyped.
        raise TaskSpecError(f"task spec {name} holds a value TOML cannot be read as: {exc}",
                            file=name) from None
    _absolutise(raw, path.absolute().parent)
    spec = validate_task_spec(raw, source=f"task spec {name}", file=name)
    # Only here, where runs are created: a stored spec is not re-checked, so a run made before
    # this check stays readable (its status calls keep their own error).
    offered_actions_check(spec, source=f"task spec {name}", file=name)
    return spec
