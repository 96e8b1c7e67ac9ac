"""The replay task spec the acceptance check runs: the git-history planner over a range of the
source, into a fresh clone at the range's base, verified by tree equality (DESIGN.md section 8)."""

from __future__ import annotations

from pathlib import Path

from runtime.taskspec.writing import replay_task_write

TASK_ID = "replay-check"
"""Task id of every run the check creates (``manage.py runs`` shows them under it)."""


def write_replay_task(*, directory: Path, source: Path, range_: str, count: int) -> Path:
    """Write ``directory/task.toml``: a replay of ``range_`` (``count`` commits) of ``source``.

    The run's clone goes to ``directory/target/<run id>/``. Budgets leave room for every commit
    plus replans (proposals and steps: ``2 * count + 20``) and a day per thousand commits of
    wall time, so a slow machine never turns a correct replay into a budget failure.

    Returns:
        The path of the task file.
    """
    return replay_task_write(
        path=directory / "task.toml",
        comment=f"Written by manage.py replay_check: replay {count} first-parent commits of the source.",
        task_id=TASK_ID, source=source, range_=range_, target=directory / "target",
        budget=2 * count + 20, wall_seconds=max(3600, 86400 * (count // 1000 + 1)))
