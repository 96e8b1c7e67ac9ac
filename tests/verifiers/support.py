"""Task files for the command verifier stories: one scripted workspace write, then a command.

The command is this interpreter (``sys.executable``) running a short ``-c`` script, so the
stories need nothing installed beyond the test environment.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from runtime.adapters.base import Observation
from runtime.taskspec import TaskSpec, load_task_spec
from runtime.taskspec.writing import toml_value
from runtime.verifiers.builtin import VerifierContext
from runtime.verifiers.command import CommandVerifier

WRITTEN = "answer.txt"
"""The file the planner writes; the scripts below check it."""

CHECK_ANSWER = (
    "import sys, pathlib\n"
    "text = pathlib.Path('answer.txt').read_text()\n"
    "print('answer.txt holds', repr(text))\n"
    "sys.exit(0 if text == '42\\n' else 1)\n"
)
"""Passes when the planner wrote ``42``; prints what it found either way."""


def python(script: str) -> list[str]:
    """``argv`` running ``script`` with the test interpreter."""
    return [sys.executable, "-c", script]


def write_command_task(directory: Path, *, argv: list[str], content: str = "42\n",
                       **options: Any) -> Path:
    """A task writing ``content`` to ``answer.txt`` in ``directory/workspace``, verified by
    ``[verifier] kind = "command"`` with ``argv`` and further ``options`` (TOML values)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "workspace").mkdir(exist_ok=True)
    verifier = [f"argv = {toml_value(argv)}"]
    for key, value in options.items():
        if isinstance(value, dict):
            continue
        verifier.append(f"{key} = {toml_value(value)}")
    tables = [f"\n[verifier.{key}]\n" + "\n".join(f"{k} = {toml_value(v)}" for k, v in value.items())
              for key, value in options.items() if isinstance(value, dict)]
    text = "\n".join([
        "[task]", 'id = "command-verifier"', 'version = "1"', "",
        "[policy]", 'id = "command-verifier"', 'version = "1"',
        'allowed_actions = ["write_file"]', 'allowed_paths = ["**"]', "",
        "[policy.budgets]", "proposals = 5", "steps = 5", "wall_seconds = 600", "",
        "[environment]", 'adapter = "workspace"', 'target = "workspace"', "",
        "[planner]", 'kind = "scripted"', "",
        "[[planner.steps]]", f'target = "{WRITTEN}"', f"content = {toml_value(content)}", "",
        "[verifier]", 'kind = "command"', *verifier, *tables, "",
    ])
    path = directory / "task.toml"
    path.write_text(text, encoding="utf-8")
    return path


def command_verifier(directory: Path, *, put_blob: Any = None, **kwargs: Any) -> tuple[CommandVerifier, TaskSpec]:
    """The verifier a task file of :func:`write_command_task` names, built as the engine does."""
    spec = load_task_spec(write_command_task(directory, **kwargs))
    options = CommandVerifier.Options.model_validate(spec.verifier.options_json())
    context = VerifierContext(spec=spec, base_dir=directory, put_blob=put_blob)
    return CommandVerifier(options=options, context=context), spec


def observation(version: str = "v1") -> Observation:
    """A stand-in observation: the command verifier only names its version."""
    return Observation(instance_id="ws-test", version=version, state_fingerprint="sha256:" + "0" * 64,
                       kind="workspace")
