"""Writing task specs: TOML text built from data, the inverse of :mod:`runtime.taskspec.loading`
(DESIGN.md section 3), and the one git-history replay task that the replay check, the benchmarks,
the demo and the tests write.

The standard library reads TOML (``tomllib``) but does not write it; :func:`toml_dumps` covers
what a task spec holds (tables, arrays of tables, strings, numbers, booleans, arrays, inline
tables), so every spec is built as a dictionary -- no string template to keep in step with
the loader. Framework-free: nothing here imports Django.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runtime.errors import TaskSpecError

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")

REPLAY_VERSIONS: Mapping[str, str] = {"model": "none", "prompt": "none", "rules": "replay-v1",
                                      "tool_schema": "git-commit-v1"}
"""The ``[versions]`` of a replay: no model or prompt, the replay rules and the commit tool."""


def _key(key: object) -> str:
    text = str(key)
    return text if _BARE_KEY.fullmatch(text) else _string(text)


def _string(text: str) -> str:
    # JSON's escapes are TOML's, except that TOML wants DEL escaped too and reads no surrogate
    # pairs (hence ensure_ascii=False: characters outside the BMP stay as they are).
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_value(value: Any) -> str:
    """``value`` as a TOML value: a string, boolean, integer, float, array or inline table.

    Raises:
        TaskSpecError: a value of a type TOML cannot carry (None, bytes, a date, an object).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TaskSpecError(f"a task spec value of type {type(value).__name__} has no TOML form")


def _is_table_array(value: Any) -> bool:
    return (isinstance(value, list | tuple) and bool(value)
            and all(isinstance(item, Mapping) for item in value))


def _table(lines: list[str], name: str, table: Mapping[str, Any]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, Mapping) and not _is_table_array(v)}
    if name and (scalars or not table):  # a table of tables only is defined by its children's headers
        lines.extend(["", f"[{name}]"] if lines else [f"[{name}]"])
    lines.extend(f"{_key(k)} = {toml_value(v)}" for k, v in scalars.items())
    for key, value in table.items():
        child = f"{name}.{_key(key)}" if name else _key(key)
        if isinstance(value, Mapping):
            _table(lines, child, value)
        elif key not in scalars:
            for item in value:
                lines.extend(["", f"[[{child}]]"])
                lines.extend(f"{_key(k)} = {toml_value(v)}" for k, v in item.items())


def toml_dumps(document: Mapping[str, Any], *, comment: str = "") -> str:
    """TOML text that ``tomllib.loads`` reads back as ``document``.

    Args:
        document: tables (mappings), arrays of tables (lists of mappings) and values
            :func:`toml_value` takes; keys in the order to write them.
        comment: lines to put first, each as a ``#`` comment ("" for none).

    Raises:
        TaskSpecError: a value TOML cannot carry.
    """
    lines = [f"# {line}".rstrip() for line in comment.splitlines()]
    if lines:
        lines.append("")
    body: list[str] = []
    _table(body, "", document)
    return "\n".join(lines + body) + "\n"


def replay_task(*, task_id: str, source: str | Path, range_: str, target: str | Path,
                policy_id: str | None = None, allowed_actions: Sequence[str] = ("commit",),
                approval_risks: Sequence[str] = (), budget: int = 40, wall_seconds: int = 600,
                risk: str | None = None, versions: Mapping[str, str] | None = REPLAY_VERSIONS,
                permissions: Sequence[str] = ("git.commit",)) -> dict[str, Any]:
    """The task spec of a git-history replay, as the dictionary the loader reads from TOML.

    The replay runs the ``git-history`` planner over ``range_`` of ``source`` into a fresh clone
    at the range's base under ``target`` (``setup = "clone-at-base"``), verified by tree
    equality (DESIGN.md section 8).

    Args:
        task_id: ``task.id``; also the ``policy.id`` unless ``policy_id`` is given.
        source: the source repository (a path relative to the task file's directory, or absolute).
        range_: the planner's range: ``"last:N"`` or ``"<base>..<tip>"``.
        target: where the per-run clones go (relative to the task file's directory, or absolute).
        allowed_actions / approval_risks: the policy's lists.
        budget: the proposals and steps budgets (each); ``wall_seconds``: the wall-time budget.
        risk: the risk the planner gives every commit (None: the planner's default).
        versions: the ``[versions]`` table (None: leave it out, every version ``"none"``).
        permissions: the policy's permissions.
    """
    planner: dict[str, Any] = {"kind": "git-history", "source": str(source), "range": range_}
    if risk is not None:
        planner["risk"] = risk
    return {
        "task": {"id": task_id, "version": "1"},
        **({"versions": dict(versions)} if versions is not None else {}),
        "policy": {"id": policy_id or task_id, "version": "1", "allowed_actions": list(allowed_actions),
                   "allowed_paths": ["**"], "permissions": list(permissions),
                   "approval_risks": list(approval_risks),
                   "budgets": {"proposals": budget, "steps": budget, "wall_seconds": wall_seconds,
                               "cost_micros": 0}},
        "environment": {"adapter": "git", "target": str(target), "setup": "clone-at-base"},
        "planner": planner,
        "verifier": {"kind": "tree-equals-source"},
    }


def replay_task_write(*, path: Path, comment: str = "", **task: Any) -> Path:
    """Write :func:`replay_task` (``task`` are its keyword arguments) to ``path`` as TOML,
    ``comment`` first; create the directory; return ``path``.

    Raises:
        OSError: the file cannot be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(toml_dumps(replay_task(**task), comment=comment), encoding="utf-8")
    return path
