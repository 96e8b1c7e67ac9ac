"""The git history the replay benchmarks replay, and the replay task that names it."""

from __future__ import annotations

import random
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from runtime.errors import BenchmarkError
from runtime.planners.git_history.source import git_env
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


def git(repo: Path, *args: str, input: bytes | None = None, **extra: str) -> str:
    """Run ``git -C repo args`` with ``input`` on stdin and ``extra`` in its environment; return
    its stdout.

    Raises:
        BenchmarkError: git exited non-zero (the message holds git's first line of stderr).
    """
    proc = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True,
                          env={**git_env(), **extra}, check=False)
    if proc.returncode != 0:
        first = proc.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        raise BenchmarkError(f"git {args[0]} failed: {first[0] if first else proc.returncode}")
    return proc.stdout.decode("utf-8", "replace")


COMMITTER = {"GIT_COMMITTER_NAME": "Bench Bot", "GIT_COMMITTER_EMAIL": "bench@example.org",
             "GIT_COMMITTER_DATE": "2025-06-01T00:00:00+00:00"}
"""The committer of every bench commit: fixed, so the history's commit ids are deterministic."""


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
        BenchmarkError: git failed.
    """
    rng = random.Random(8785)
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    files: list[str] = []

    def write(rel: str, text: str, mode: int = 0o644) -> None:
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        target.chmod(mode)

    def commit(message: str, n: int) -> str:
        git(path, "add", "-A")
        date = (datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=n)).isoformat()
        git(path, "commit", "-q", "--allow-empty", "-F", "-", input=message.encode(),
            GIT_AUTHOR_NAME="Ada Lovelace", GIT_AUTHOR_EMAIL="ada@example.org",
            GIT_AUTHOR_DATE=date, **COMMITTER)
        return git(path, "rev-parse", "HEAD").strip()

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
