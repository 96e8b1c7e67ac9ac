"""A private copy of a task spec per chaos run, so runs never share an environment (section 8.2).

A spec whose environment is prepared per run (``setup`` other than ``"none"``) already gets a
fresh target for every run (``<target>/<run id>``); the copy only pins its paths. For any other
spec the copy points ``environment.target`` at a new directory under the campaign's work
directory, seeded with the original target's files (without the adapter's own records, the
``.ratchet`` journal, so the copy is a new instance) when its adapter is ``workspace`` (an
empty directory when the original does not exist: chaos prepares the workspace itself); any
other adapter keeps its target, which is then shared by the runs (an HTTP service, a database),
and the final-environment comparison is skipped for it. Relative paths the loader resolves
(``environment.target``, ``planner.source``) are made absolute; any other relative path in the
spec resolves against the copy's directory, so such specs should use absolute paths.
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime.errors import TaskSpecError

_SKIPPED = shutil.ignore_patterns(".ratchet", ".git")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_value(v)}" for k, v in value.items()) + "}"
    raise TaskSpecError(f"task spec value of type {type(value).__name__} cannot be copied")


def _table(lines: list[str], name: str, table: Mapping[str, Any]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, Mapping)
               and not (isinstance(v, list) and v and all(isinstance(i, Mapping) for i in v))}
    if name:
        lines.append(f"[{name}]")
    lines.extend(f"{json.dumps(str(k))} = {_value(v)}" for k, v in scalars.items())
    for key, value in table.items():
        child = f"{name}.{json.dumps(str(key))}" if name else json.dumps(str(key))
        if isinstance(value, Mapping):
            _table(lines, child, value)
        elif key not in scalars:
            for item in value:
                lines.append(f"[[{child}]]")
                lines.extend(f"{json.dumps(str(k))} = {_value(v)}" for k, v in item.items())


def toml_dumps(document: Mapping[str, Any]) -> str:
    """TOML text for a document read by ``tomllib`` (tables, arrays of tables, scalars)."""
    lines: list[str] = []
    _table(lines, "", document)
    return "\n".join(lines) + "\n"


def spec_copy(*, spec: Path, directory: Path) -> tuple[Path, bool]:
    """Write ``directory/task.toml``, a copy of ``spec`` acting on a target of its own.

    Returns:
        ``(path, own_target)``: the copy, and whether its target belongs to this run alone
        (False for an adapter whose target is a shared service, such as ``http``).

    Raises:
        TaskSpecError: the spec cannot be read or holds a value TOML cannot carry.
    """
    try:
        raw = tomllib.loads(spec.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TaskSpecError(f"task spec {spec.name} cannot be read: {exc}", file=spec.name) from None
    base = spec.resolve().parent
    environment = raw.setdefault("environment", {})
    planner = raw.get("planner", {})
    if isinstance(planner.get("source"), str):
        planner["source"] = os.path.normpath(os.path.join(base, planner["source"]))
    original = Path(os.path.normpath(os.path.join(base, str(environment.get("target", ".")))))
    directory.mkdir(parents=True, exist_ok=True)
    own = True
    if environment.get("setup", "none") != "none":
        environment["target"] = str(directory / "target")
    elif environment.get("adapter") == "workspace":
        fresh = directory / "target"
        if original.is_dir():
            shutil.copytree(original, fresh, ignore=_SKIPPED, dirs_exist_ok=True)
        fresh.mkdir(parents=True, exist_ok=True)
        environment["target"] = str(fresh)
    else:
        own = False
        environment["target"] = str(original)
    path = directory / "task.toml"
    path.write_text(toml_dumps(raw), encoding="utf-8")
    return path, own
