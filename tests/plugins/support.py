"""Task files for the plug-in stories: the example package's agent, by name or by dotted path."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

EXAMPLE = "ratchet-example-agent"


def require_example_package() -> None:
    """Skip (fail under CI=true) when ``tests/example_agent`` is not installed; ``tests/run``
    installs it, the tests never install anything themselves."""
    try:
        importlib.metadata.distribution(EXAMPLE)
    except importlib.metadata.PackageNotFoundError:
        message = f"{EXAMPLE} is not installed: pip install -e tests/example_agent (tests/run does)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def notes_task(directory: Path, *, notes: int = 3, planner: str = 'kind = "note-taker"',
               adapter: str = 'adapter = "kv-store"', verifier: str | None = None,
               planner_options: str | None = None, adapter_options: str = "") -> Path:
    """Write a task spec running the example agent into ``directory/task.toml``.

    Args:
        planner / adapter: the TOML line naming the plug-in (by name or ``"python"`` + entry).
        verifier: the ``[verifier]`` body (default: the example's ``notes-present``).
        planner_options: the planner's option lines (default: ``notes = <notes>``).
        adapter_options: lines of ``[environment.options]`` (none by default).
    """
    directory.mkdir(parents=True, exist_ok=True)
    verifier = verifier or f'kind = "notes-present"\nnotes = {notes}'
    options = planner_options if planner_options is not None else f"notes = {notes}"
    env_options = f"\n[environment.options]\n{adapter_options}\n" if adapter_options else ""
    text = f"""[task]
id = "notes"
version = "1"

[policy]
id = "notes"
version = "1"
allowed_actions = ["put"]
allowed_paths = ["**"]

[policy.budgets]
proposals = 20
steps = 20
wall_seconds = 600

[environment]
{adapter}
target = "store"
{env_options}
[planner]
{planner}
{options}

[verifier]
{verifier}
"""
    path = directory / "task.toml"
    path.write_text(text, encoding="utf-8")
    return path


def store(directory: Path) -> dict:
    """The example store's file, as the adapter keeps it (its own records)."""
    import json

    return json.loads((directory / "store" / "kv.json").read_text(encoding="utf-8"))
