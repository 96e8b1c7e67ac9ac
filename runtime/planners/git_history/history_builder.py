"""Building git histories to replay, the same on every machine: the regression fixtures' small
history (:mod:`runtime.regression.sources`), the benchmarks' generated one
(:mod:`runtime.bench.history`) and the tests' histories are all built with these functions.

Every call runs in :func:`runtime.planners.git_history.source.git_env` (no user or system config)
with a fixed committer; every commit takes its author date from the caller. Fixed identities and
dates make the commit ids, trees and every replayed action's intent digest stable, which is what
lets a regression fixture record them (DESIGN.md section 8.5).

:func:`commit_action_apply` makes a git-history planner's ``commit`` action by hand -- plain file
writes and ``git commit``, no adapter: the benchmarks' baseline and the planner stories use it.

Framework-free.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from runtime.errors import ConfigurationError
from runtime.planners.git_history.source import git_env

AUTHOR = ("Ada Lovelace", "ada@example.org")
"""``(name, email)`` of every commit that names no other author."""

COMMITTER = {"GIT_COMMITTER_NAME": "Replay Bot", "GIT_COMMITTER_EMAIL": "replay@example.org",
             "GIT_COMMITTER_DATE": "2025-06-01T00:00:00+00:00"}
"""The committer of every commit made here (``**env`` of a call may override it)."""

_COMMIT = ("commit", "-q", "--allow-empty", "--allow-empty-message", "--cleanup=verbatim", "--no-verify",
           "-F", "-")
"""Commit exactly the message given (verbatim, possibly empty) and the tree staged (possibly
unchanged); no hooks."""


def history_git(repo: Path, *args: str, input: bytes | None = None, **env: str) -> str:
    """Run ``git -C repo args`` with ``input`` on stdin; return its stdout as text.

    The environment is :func:`git_env` plus :data:`COMMITTER`, :data:`AUTHOR`'s name and email
    (so a merge has an author), then ``env`` (``GIT_AUTHOR_DATE=...``, ...).

    Raises:
        ConfigurationError: git exited non-zero (the message carries its stderr).
    """
    proc = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True,
                          env={**git_env(), **COMMITTER, "GIT_AUTHOR_NAME": AUTHOR[0],
                               "GIT_AUTHOR_EMAIL": AUTHOR[1], **env}, check=False)
    if proc.returncode != 0:
        raise ConfigurationError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace')[:300]}")
    return proc.stdout.decode("utf-8", "replace")


def history_init(repo: Path, *, branch: str = "main") -> None:
    """Create ``repo`` (its parents too; it must not exist) as an empty repository on ``branch``.

    Raises:
        FileExistsError: ``repo`` exists.
        ConfigurationError: git failed.
    """
    repo.mkdir(parents=True)
    history_git(repo, "init", "-q", "-b", branch)


def history_write(repo: Path, rel: str, data: str | bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` (text as UTF-8) to ``repo/rel``, its directories created, with ``mode``."""
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    path.chmod(mode)


def history_commit(repo: Path, message: str | bytes, *, date: str, author: tuple[str, str] = AUTHOR,
                   stage: bool = True, **env: str) -> None:
    """Commit the work tree of ``repo`` (everything, ignored files too, unless ``stage`` is False:
    then what is staged) with exactly ``message``.

    Args:
        date: the author date, as git reads ``GIT_AUTHOR_DATE`` (``2024-03-01T09:00:00+00:00``,
            ``1700000000 +0200``).
        author: ``(name, email)``.
        env: more of git's environment (``GIT_COMMITTER_DATE=...`` to move the committer).

    Raises:
        ConfigurationError: git failed.
    """
    if stage:
        history_git(repo, "add", "-A", "--force")
    history_git(repo, *_COMMIT, input=message.encode("utf-8") if isinstance(message, str) else message,
                **{"GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1], "GIT_AUTHOR_DATE": date, **env})


def history_head(repo: Path) -> str:
    """The commit id ``HEAD`` of ``repo`` names.

    Raises:
        ConfigurationError: git failed (no commit yet).
    """
    return history_git(repo, "rev-parse", "HEAD").strip()


def _prune_empty_parents(root: Path, path: Path) -> None:
    parent = path.parent
    while parent != root and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def commit_action_apply(*, repo: Path, params: Mapping[str, Any], blob: Callable[[str], bytes]) -> None:
    """Make a git-history ``commit`` action in ``repo`` by hand: write and delete its files, then
    :func:`history_commit` with its message and author.

    Args:
        repo: a work tree at the commit the action applies to.
        params: the action's parameters (``changes``: ``{"op": "write" | "delete", "path",
            "content": blob digest, "executable"}``; ``message``; ``author_name``,
            ``author_email``, ``author_date``).
        blob: the bytes of a blob digest.

    Raises:
        ConfigurationError: git failed.
        KeyError / OSError: the parameters name a blob ``blob`` does not have or a file that is
            not there to delete.
    """
    for change in params["changes"]:
        path = repo / change["path"]
        if change["op"] == "delete":
            path.unlink()
            _prune_empty_parents(repo, path)
        else:
            history_write(repo, change["path"], blob(change["content"]),
                          mode=0o755 if change["executable"] else 0o644)
    history_commit(repo, str(params["message"]), date=str(params["author_date"]),
                   author=(str(params["author_name"]), str(params["author_email"])))
