"""The replay task spec the acceptance check runs: the git-history planner over a range of the
source, into a fresh clone at the range's base, verified by tree equality (DESIGN.md section 8)."""

from __future__ import annotations

import json
from pathlib import Path

TASK_ID = "replay-check"
"""Task id of every run the check creates (``manage.py runs`` shows them under it)."""

_TASK = """\
# Written by manage.py replay_check: replay {count} first-parent commits of the source.

[task]
id = "{task_id}"
version = "1"

[versions]
model = "none"
prompt = "none"
rules = "replay-v1"
tool_schema = "git-commit-v1"

[policy]
id = "replay-check"
version = "1"
allowed_actions = ["commit"]
allowed_paths = ["**"]
permissions = ["git.commit"]
approval_risks = []

[policy.budgets]
proposals = {budget}
steps = {budget}
wall_seconds = {wall_seconds}
cost_micros = 0

[environment]
adapter = "git"
target = {target}
setup = "clone-at-base"

[planner]
kind = "git-history"
source = {source}
range = {range}

[verifier]
kind = "tree-equals-source"
"""


def write_replay_task(*, directory: Path, source: Path, range_: str, count: int) -> Path:
    """Write ``directory/task.toml``: a replay of ``range_`` (``count`` commits) of ``source``.

    The run's clone goes to ``directory/target/<run id>/``. Budgets leave room for every commit
    plus replans (proposals and steps: ``2 * count + 20``) and a day per thousand commits of
    wall time, so a slow machine never turns a correct replay into a budget failure.

    Returns:
        The path of the task file.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "task.toml"
    path.write_text(_TASK.format(
        count=count,
        task_id=TASK_ID,
        budget=2 * count + 20,
        wall_seconds=max(3600, 86400 * (count // 1000 + 1)),
        target=json.dumps(str(directory / "target")),
        source=json.dumps(str(source)),
        range=json.dumps(range_),
    ), encoding="utf-8")
    return path
