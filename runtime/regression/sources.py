"""What the regression fixtures' scenarios need outside the database: the small source history
and a git that hangs on its commit point (DESIGN.md section 8.5).

Both are built the same way on every machine: fixed author and committer dates make the commit
ids, trees and every replayed action's intent digest stable, which is what lets a fixture record
them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import runtime.adapters.git.process as git_process
from runtime.errors import ConfigurationError
from runtime.planners.git_history.source import git_env

COMMITTER = {"GIT_COMMITTER_NAME": "Replay Bot", "GIT_COMMITTER_EMAIL": "replay@example.org",
             "GIT_COMMITTER_DATE": "2025-06-01T00:00:00+00:00"}


def regress_git(repo: Path, *args: str, input: bytes | None = None, **env: str) -> str:
    """Run git in ``repo`` with a neutral config and the fixed committer; stdout as text.

    Raises:
        ConfigurationError: git failed (the message carries its stderr).
    """
    proc = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True,
                          env={**git_env(), **COMMITTER, **env}, check=False)
    if proc.returncode != 0:
        raise ConfigurationError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace')[:300]}")
    return proc.stdout.decode("utf-8", "replace")


def _write(repo: Path, rel: str, text: str, *, mode: int = 0o644) -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)


def _commit(repo: Path, message: str, date: str) -> None:
    regress_git(repo, "add", "-A")
    regress_git(repo, "commit", "-q", "--allow-empty", "-F", "-", input=message.encode(),
                GIT_AUTHOR_NAME="Ada Lovelace", GIT_AUTHOR_EMAIL="ada@example.org", GIT_AUTHOR_DATE=date)


def small_history_build(repo: Path) -> None:
    """A root commit plus five: add, edit two files, add an executable, delete, add in a directory."""
    repo.mkdir(parents=True)
    regress_git(repo, "init", "-q", "-b", "main")
    _write(repo, "README.md", "hello\n")
    _write(repo, "notes.txt", "short-lived notes\n")
    _commit(repo, "Initial import\n", "2024-03-01T09:00:00+00:00")
    _write(repo, "src/app.py", "print('v1')\n")
    _commit(repo, "Add the app\n", "2024-03-02T09:00:00+01:00")
    _write(repo, "README.md", "hello\nworld\n")
    _write(repo, "src/app.py", "print('v2')\n")
    _commit(repo, "Edit README and app\n\nTwo files at once.\n", "2024-03-03T09:00:00-05:00")
    _write(repo, "scripts/run.sh", "#!/bin/sh\necho run\n", mode=0o755)
    _commit(repo, "Add an executable script\n", "2024-03-04T09:00:00+00:00")
    (repo / "notes.txt").unlink()
    _commit(repo, "Delete the notes\n", "2024-03-05T09:00:00+00:00")
    _write(repo, "docs/guide/intro.md", "# Intro\n")
    (repo / "src/app.py").chmod(0o755)
    _commit(repo, "Add docs; make the app executable\n", "2024-03-06T09:00:00+09:00")


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
