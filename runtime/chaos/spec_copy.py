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

import os
import shutil
import tomllib
from pathlib import Path

from runtime.errors import TaskSpecError
from runtime.taskspec.writing import toml_dumps

_SKIPPED = shutil.ignore_patterns(".ratchet", ".git")


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
