"""The git history the replay benchmarks replay, and the replay task that names it."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from runtime.planners.git_history.history_builder import history_commit, history_head, history_init, history_write
from runtime.taskspec.writing import replay_task_write

_WORDS = ("ratchet checkpoint lease fence receipt intent digest replay commit tree branch "
          "approval reviewer generation trace evidence adapter planner verifier budget").split()


def _text(rng: random.Random, size: int) -> str:
    lines, total = [], 0
    while total < size:
        line = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 12))) + "\n"
        lines.append(line)
        total += len(line)
    return "".join(lines)


def build_source_history(*, path: Path, commits: int) -> list[str]:
    """Build a git repository at ``path``: a root commit of 12 files, then ``commits`` commits.

    Every commit edits two files and adds one; every third also deletes one, every fifth adds
    an executable script in a nested directory. Content and dates are deterministic.

    Args:
        path: a directory that does not exist yet.
        commits: commits after the root (>= 1).

    Returns:
        The ``commits`` commit ids after the root, oldest first.

    Raises:
        ConfigurationError: git failed.
    """
    rng = random.Random(8785)
    history_init(path)
    files: list[str] = []

    def write(rel: str, text: str, mode: int = 0o644) -> None:
        history_write(path, rel, text, mode=mode)

    def commit(message: str, n: int) -> str:
        history_commit(path, message, date=(datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=n)).isoformat())
        return history_head(path)

    for i in range(12):
        rel = f"src/module_{i:02d}.py"
        write(rel, _text(rng, rng.randint(2048, 8192)))
        files.append(rel)
    write("README.md", "# Bench source\n")
    commit("Initial import\n", 0)
    made = []
    for n in range(1, commits + 1):
        for rel in rng.sample(files, k=min(2, len(files))):
            write(rel, _text(rng, rng.randint(2048, 8192)))
        rel = f"{rng.choice(['src', 'docs', 'data/nested/deep'])}/file_{n:04d}.txt"
        write(rel, _text(rng, rng.randint(512, 4096)))
        files.append(rel)
        if n % 3 == 0 and len(files) > 4:
            gone = rng.choice(files)
            files.remove(gone)
            (path / gone).unlink()
        if n % 5 == 0:
            write(f"scripts/tools/tool_{n:04d}.sh", f"#!/bin/sh\necho tool {n}\n", mode=0o755)
        made.append(commit(f"Change {n}\n\nEdit two files, add one; sometimes delete.\n", n))
    return made


def write_replay_task(*, directory: Path, source: Path, commits: int) -> Path:
    """Write a git-history replay task of ``source``'s last ``commits`` commits; return its path.

    Each run replays into ``directory/targets/<run id>`` (a fresh clone at the base).
    """
    return replay_task_write(path=directory / "task.toml", task_id="bench-replay", source=source,
                             range_=f"last:{commits}", target="targets", approval_risks=("high",),
                             budget=commits + 10, wall_seconds=86400)
