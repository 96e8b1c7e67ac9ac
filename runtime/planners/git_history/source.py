"""Reading the replay source repository: running git there and resolving a commit range.

All git calls use a neutral environment (no system or global config, no prompts, C locale, no
optional locks, no inherited ``GIT_*`` variables such as ``GIT_DIR``), so a plan made from the
same source is the same plan on any machine. Imports nothing from Django.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from runtime.errors import GitReplayError
from runtime.taskspec import MAX_LAST_COMMITS

GIT_TIMEOUT_SECONDS = 300.0
"""Upper bound for one git command; a hung git must not hold a worker's lease forever."""


def git_env() -> dict[str, str]:
    """The environment every git call runs in: inherited, minus ``GIT_*``, plus neutral settings.

    Inherited ``GIT_*`` variables (``GIT_DIR``, ``GIT_INDEX_FILE``, ...) could point a command at
    another repository, and user or system config (aliases, ``diff.orderFile``, hooks paths) could
    change what it prints, so both are dropped for reproducible plans.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        LC_ALL="C",
    )
    return env


def run_git(
    repo: Path | str | None, *args: str, input: bytes | None = None,
    timeout: float = GIT_TIMEOUT_SECONDS, pass_fds: Sequence[int] = (),
) -> bytes:
    """Run ``git [-C repo] args...`` in :func:`git_env` and return its stdout bytes.

    Args:
        repo: the repository directory, or None for commands that take no repository.
        args: git arguments; callers never pass user text that could start with ``-``.
        input: bytes for stdin.
        timeout: seconds before the command is killed.
        pass_fds: descriptors the child inherits (a held lock, so it outlives a killed parent).

    Raises:
        GitReplayError: git is missing, timed out, or exited non-zero (first stderr line shown).
    """
    cmd = ["git"] + (["-C", str(repo)] if repo is not None else []) + list(args)
    try:
        proc = subprocess.run(
            cmd, input=input, capture_output=True, env=git_env(), timeout=timeout, check=False,
            pass_fds=tuple(pass_fds),
        )
    except FileNotFoundError:
        raise GitReplayError("the git executable was not found on PATH") from None
    except subprocess.TimeoutExpired:
        raise GitReplayError(f"git {args[0]} timed out after {timeout:g} s") from None
    if proc.returncode != 0:
        first = proc.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        raise GitReplayError(
            f"git {args[0]} failed with exit code {proc.returncode}: {first[0] if first else ''}"
        )
    return proc.stdout


def rev_parse_commit(repo: Path | str, rev: str) -> str:
    """The full object id of commit ``rev`` in ``repo``.

    Raises:
        GitReplayError: ``rev`` does not name a commit there.
    """
    try:
        out = run_git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except GitReplayError:
        raise GitReplayError(f"{rev!r:.80} is not a commit of the source repository") from None
    return out.decode("ascii").strip()


def tree_of(repo: Path | str, rev: str) -> str:
    """The tree id of commit ``rev`` in ``repo`` (``git rev-parse <rev>^{tree}``)."""
    return run_git(repo, "rev-parse", "--verify", f"{rev}^{{tree}}").decode("ascii").strip()


def same_tree_content(source: Path | str, source_tree: str, target: Path | str,
                      target_tree: str) -> bool:
    """Whether two trees hold the same files: equal ids, or equal recursive listings.

    A listing is ``git ls-tree -r -z --full-tree``: one ``mode type id path`` line per file,
    symlink and gitlink, with the mode as git reads it. Git before 1.5 wrote tree entries that
    current git never writes -- zero-padded ``040000`` subtree modes, group-writable ``100664``
    files -- and reads them as ``40000`` and ``100644``; a replay rebuilds such a tree the way
    current git writes it, so its id differs while every file, mode and id is the same and a
    checkout is identical. Subtree ids are left out of the listing for the same reason: a
    changed subtree is rewritten canonically (DESIGN.md section 5.5).

    Raises:
        GitReplayError: a tree cannot be read.
    """
    if source_tree == target_tree:
        return True
    listing = ("ls-tree", "-r", "-z", "--full-tree")
    return run_git(source, *listing, source_tree) == run_git(target, *listing, target_tree)


def cat_batch(repo: Path, oids: Sequence[str], *, kind: str) -> list[bytes]:
    """Contents of objects ``oids`` (all of type ``kind``), in one ``git cat-file --batch`` call.

    Raises:
        GitReplayError: an object is missing or of another type.
    """
    if not oids:
        return []
    out = run_git(repo, "cat-file", "--batch", input="".join(f"{o}\n" for o in oids).encode())
    contents: list[bytes] = []
    pos = 0
    for oid in oids:
        newline = out.find(b"\n", pos)
        parts = out[pos:newline].split(b" ") if newline != -1 else []
        if len(parts) != 3:
            raise GitReplayError(f"object {oid} is missing from the source repository")
        found_kind, size = parts[1].decode("ascii"), int(parts[2])
        if found_kind != kind:
            raise GitReplayError(f"object {oid} is a {found_kind}, expected a {kind}")
        start = newline + 1
        contents.append(out[start : start + size])
        pos = start + size + 1
    return contents


def resolve_range(source: Path, range_: str) -> tuple[str, str, list[str]]:
    """``(base, tip, commits)`` of ``range_`` in ``source``; commits oldest first, first-parent.

    ``"last:N"``: the last N first-parent commits of HEAD; the base is the first parent of the
    oldest, so the history needs at least N+1 commits. ``"A..B"``: the first-parent commits after
    A up to B; A must be on B's first-parent line (else the replay would not start from A).

    Raises:
        GitReplayError: a revision does not exist, the range is empty or too long, or the base
            is not where the replay would start.
    """
    if not source.is_dir():
        raise GitReplayError(
            f"source repository {source.name!r} does not exist or is not a directory"
        )
    last = re.fullmatch(r"last:(\d+)", range_)
    if last:
        count = int(last.group(1))
        tip = rev_parse_commit(source, "HEAD")
        out = run_git(source, "rev-list", "--first-parent", f"--max-count={count}", tip)
        commits = out.decode("ascii").split()[::-1]
        if len(commits) < count:
            raise GitReplayError(
                f"range last:{count} needs {count + 1} first-parent commits; "
                f"HEAD has {len(commits)}"
            )
        try:
            base = rev_parse_commit(source, f"{commits[0]}^1")
        except GitReplayError:
            raise GitReplayError(
                f"range last:{count} needs {count + 1} first-parent commits: the oldest has no "
                "parent to start the replay from"
            ) from None
        return base, tip, commits
    if "..." in range_ or range_.count("..") != 1:
        raise GitReplayError(f"range {range_!r:.100} must be 'A..B' or 'last:N'")
    base_rev, tip_rev = range_.split("..")
    if not base_rev or not tip_rev or base_rev.startswith("-") or tip_rev.startswith("-"):
        raise GitReplayError(f"range {range_!r:.100} has an empty or malformed revision")
    base, tip = rev_parse_commit(source, base_rev), rev_parse_commit(source, tip_rev)
    out = run_git(source, "rev-list", "--first-parent", "--reverse", f"{base}..{tip}")
    commits = out.decode("ascii").split()
    if not commits:
        raise GitReplayError(f"range {range_!r:.100} holds no commits")
    if len(commits) > MAX_LAST_COMMITS:
        raise GitReplayError(
            f"range {range_!r:.100} holds {len(commits)} commits; at most {MAX_LAST_COMMITS} "
            "are replayed in one run"
        )
    first_parent = run_git(source, "rev-parse", "--verify", "--quiet", f"{commits[0]}^1")
    if first_parent.decode("ascii").strip() != base:
        raise GitReplayError(
            f"range {range_!r:.100}: {base_rev} is not on the first-parent line of {tip_rev}"
        )
    return base, tip, commits
