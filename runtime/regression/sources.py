"""What the regression fixtures' scenarios need outside the database: the small source history
and a git that hangs on its commit point (DESIGN.md section 8.5).

The history is built with :mod:`runtime.planners.git_history.history_builder`, the same way on
every machine: fixed author and committer dates make the commit ids, trees and every replayed
action's intent digest stable, which is what lets a fixture record them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import runtime.adapters.git.process as git_process
from runtime.errors import ConfigurationError
from runtime.planners.git_history.history_builder import (
    history_commit,
    history_head,
    history_init,
    history_write,
)

SMALL_HISTORY_COMMITS = 5
"""Commits after the root in :func:`small_history_build`; the fixtures replay ``last:5``."""


def small_history_build(repo: Path) -> list[str]:
    """A root commit plus five: add, edit two files, add an executable, delete, add in a
    directory (and make a file executable). Returns the five commit ids, oldest first.

    Raises:
        FileExistsError: ``repo`` exists.
        ConfigurationError: git failed.
    """
    history_init(repo)
    history_write(repo, "README.md", "hello\n")
    history_write(repo, "notes.txt", "short-lived notes\n")
    history_commit(repo, "Initial import\n", date="2024-03-01T09:00:00+00:00")
    commits = []
    history_write(repo, "src/app.py", "print('v1')\n")
    history_commit(repo, "Add the app\n", date="2024-03-02T09:00:00+01:00")
    commits.append(history_head(repo))
    history_write(repo, "README.md", "hello\nworld\n")
    history_write(repo, "src/app.py", "print('v2')\n")
    history_commit(repo, "Edit README and app\n\nTwo files at once.\n", date="2024-03-03T09:00:00-05:00")
    commits.append(history_head(repo))
    history_write(repo, "scripts/run.sh", "#!/bin/sh\necho run\n", mode=0o755)
    history_commit(repo, "Add an executable script\n", date="2024-03-04T09:00:00+00:00")
    commits.append(history_head(repo))
    (repo / "notes.txt").unlink()
    history_commit(repo, "Delete the notes\n", date="2024-03-05T09:00:00+00:00")
    commits.append(history_head(repo))
    history_write(repo, "docs/guide/intro.md", "# Intro\n")
    (repo / "src/app.py").chmod(0o755)
    history_commit(repo, "Add docs; make the app executable\n", date="2024-03-06T09:00:00+09:00")
    commits.append(history_head(repo))
    return commits


HANGING_GIT = """#!/bin/sh
# A git that hangs on `update-ref` for its first {limit} call(s): {when} the real ref update.
for arg in "$@"; do
  if [ "$arg" = update-ref ]; then
    hangs=$(cat "{state}" 2>/dev/null | wc -l)
    if [ "$hangs" -lt {limit} ]; then
      echo hang >> "{state}"
      {real_first}
      exec sleep 60
    fi
  fi
done
exec "{git}" "$@"
"""


def hanging_git_install(directory: Path, *, limit: int, after_update: bool) -> Path:
    """Write a ``git`` wrapper into ``directory`` (created if missing) and return the directory,
    to be put first on PATH.

    The wrapper passes every call through to the real git, except the first ``limit`` calls of
    ``git update-ref`` -- the git adapter's commit point. Those hang (``exec sleep``, so the
    adapter's timeout kills the very process it started) either before the real ref update
    (``after_update=False``: nothing committed) or right after it (``after_update=True``: the
    commit landed, the caller never hears of it). The hangs so far are counted in
    ``directory/hangs``, one line each.

    Raises:
        ConfigurationError: no git on PATH.
    """
    real = shutil.which("git")
    if real is None:
        raise ConfigurationError("git is not installed on this machine")
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "git"
    script.write_text(HANGING_GIT.format(
        limit=limit, state=directory / "hangs", git=real, when="after" if after_update else "before",
        real_first=f'"{real}" "$@" >/dev/null 2>&1' if after_update else ":"), encoding="utf-8")
    script.chmod(0o755)
    return directory


@contextmanager
def hanging_git(directory: Path, *, limit: int, after_update: bool, timeout_seconds: float) -> Iterator[None]:
    """While inside: ``git`` on PATH hangs on its first ``limit`` ``update-ref`` calls (before or
    after the real update) and the git adapter times out after ``timeout_seconds``; both are
    restored on exit.

    Raises:
        ConfigurationError: no git on PATH.
    """
    hanging_git_install(directory, limit=limit, after_update=after_update)
    path, timeout = os.environ.get("PATH", ""), git_process.GIT_TIMEOUT_SECONDS
    os.environ["PATH"] = f"{directory}{os.pathsep}{path}"
    git_process.GIT_TIMEOUT_SECONDS = timeout_seconds
    try:
        yield
    finally:
        os.environ["PATH"] = path
        git_process.GIT_TIMEOUT_SECONDS = timeout
