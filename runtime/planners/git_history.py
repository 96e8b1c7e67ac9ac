"""The git-history replay planner: re-create a range of commits as deterministic commit actions.

Given a source repository and a range (``"A..B"`` or ``"last:N"``), the planner lists the range's
first-parent commits oldest first (``git rev-list --first-parent``) and pins them, with the base
and tip, in its planner state at run creation -- a resume never depends on where the source's
HEAD points later. For commit ``i`` it computes the changes against the previous commit of the
list (its first parent; for a merge this is the mainline, so a merge replays as one commit with
the merged-in changes) and proposes one ``"commit"`` action::

    Action(kind="commit", target="", risk=<spec risk>, params={
        "message": <original message, verbatim>,
        "author_name": ..., "author_email": ..., "author_date": <ISO 8601 with offset, like %aI>,
        "changes": [{"op": "delete", "path": ...}, ...,                     # deletes first,
                    {"op": "write", "path": ..., "content": "sha256:...",  # then writes,
                     "executable": bool}, ...],                            # each sorted by path
    })

Deletes come before writes so a file replaced by a directory (or the reverse) applies in order;
an adapter should prune directories left empty by a delete, as git does. ``changes`` may be
empty (an empty commit, or a merge that changed nothing on the mainline); the adapter should
still make one commit so the commit count matches.

What is not replayed: submodules (mode 160000), symlinks (mode 120000) and paths or metadata
that are not valid UTF-8 (or the commit's declared encoding). Every commit of the range is
scanned at run creation, so such a range fails then with :class:`GitReplayUnsupportedError`
naming the commit and path -- never halfway through a run.

:func:`prepare_target` creates the replay target as a fresh clone of the source at the base.
All git calls use a neutral environment (no system or global config, no prompts, C locale, no
optional locks, no inherited ``GIT_*`` variables such as ``GIT_DIR``).
"""

from __future__ import annotations

import codecs
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from runtime.core.checkpoint import Action, Risk
from runtime.errors import (
    GitReplayError,
    GitReplayUnsupportedError,
    PlannerError,
    PlannerStateError,
    ReplayTargetNotEmptyError,
)
from runtime.planners.base import Done, PlannerState, Proposal, PutBlob, check_cursor
from runtime.taskspec import MAX_LAST_COMMITS, GitHistoryPlannerSpec, TaskSpec

if TYPE_CHECKING:
    from runtime.adapters.base import Observation

GIT_TIMEOUT_SECONDS = 300.0
"""Upper bound for one git command; a hung git must not hold a worker's lease forever."""

REPLAY_BRANCH = "ratchet-replay"
"""Branch checked out at the base in a prepared replay target."""

_OID_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_AUTHOR_RE = re.compile(rb"^(.*) <([^<>]*)> (\d+) ([+-])(\d{2})(\d{2})$")
_REGULAR, _EXECUTABLE, _SYMLINK, _GITLINK = "100644", "100755", "120000", "160000"


# --- running git ----------------------------------------------------------------------------


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
    timeout: float = GIT_TIMEOUT_SECONDS,
) -> bytes:
    """Run ``git [-C repo] args...`` in :func:`git_env` and return its stdout bytes.

    Args:
        repo: the repository directory, or None for commands that take no repository.
        args: git arguments; callers never pass user text that could start with ``-``.
        input: bytes for stdin.
        timeout: seconds before the command is killed.

    Raises:
        GitReplayError: git is missing, timed out, or exited non-zero (first stderr line shown).
    """
    cmd = ["git"] + (["-C", str(repo)] if repo is not None else []) + list(args)
    try:
        proc = subprocess.run(
            cmd, input=input, capture_output=True, env=git_env(), timeout=timeout, check=False
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


def _cat_batch(repo: Path, oids: Sequence[str], *, kind: str) -> list[bytes]:
    """Contents of objects ``oids`` (all of type ``kind``), in one ``git cat-file --batch`` call."""
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


# --- reading commits ------------------------------------------------------------------------


@dataclass(frozen=True)
class CommitMeta:
    """What a replayed commit carries over: message verbatim, author name, email and date."""

    message: str
    author_name: str
    author_email: str
    author_date: str
    """ISO 8601 with the author's UTC offset, as ``git log --format=%aI`` prints it."""


@dataclass(frozen=True)
class _Entry:
    status: str
    old_mode: str
    new_mode: str
    new_oid: str
    path: str


def _decode(raw: bytes, encoding: str, *, what: str, commit: str) -> str:
    try:
        return raw.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        raise GitReplayUnsupportedError(
            f"{what} of commit {commit} is not valid {encoding}", commit=commit
        ) from None


def parse_commit(raw: bytes, *, commit: str) -> CommitMeta:
    """Parse a raw commit object (``git cat-file commit``) into :class:`CommitMeta`.

    Raises:
        GitReplayUnsupportedError: the author line is malformed or text does not decode.
    """
    header, _, message = raw.partition(b"\n\n")
    encoding = "utf-8"
    author: bytes | None = None
    for line in header.split(b"\n"):
        if line.startswith(b" "):  # continuation of a multi-line header such as gpgsig
            continue
        key, _, value = line.partition(b" ")
        if key == b"author":
            author = value
        elif key == b"encoding":
            encoding = value.decode("ascii", "replace").strip()
            try:
                codecs.lookup(encoding)
            except LookupError:
                raise GitReplayUnsupportedError(
                    f"commit {commit} declares unknown encoding {encoding!r:.40}", commit=commit
                ) from None
    match = _AUTHOR_RE.match(author or b"")
    if match is None:
        raise GitReplayUnsupportedError(
            f"commit {commit} has a malformed author line", commit=commit
        )
    name, email, seconds, sign, hours, minutes = match.groups()
    offset = timedelta(hours=int(hours), minutes=int(minutes)) * (-1 if sign == b"-" else 1)
    when = datetime.fromtimestamp(int(seconds), tz=timezone(offset))
    return CommitMeta(
        message=_decode(message, encoding, what="message", commit=commit),
        author_name=_decode(name, encoding, what="author name", commit=commit),
        author_email=_decode(email, encoding, what="author email", commit=commit),
        author_date=when.isoformat(),
    )


def _diff(repo: Path, parent: str, commit: str) -> list[_Entry]:
    """Changed blobs from ``parent`` to ``commit``, validated as replayable."""
    out = run_git(repo, "diff-tree", "-r", "--no-renames", "--no-commit-id", "-z", parent, commit)
    tokens = out.split(b"\x00")
    entries: list[_Entry] = []
    i = 0
    while i + 1 < len(tokens) and tokens[i]:
        meta, raw_path = tokens[i], tokens[i + 1]
        i += 2
        fields = meta.lstrip(b":").decode("ascii").split(" ")
        if len(fields) != 5:
            raise GitReplayError(
                f"unexpected git diff-tree output for commit {commit}", commit=commit
            )
        old_mode, new_mode, _old_oid, new_oid, status = fields
        try:
            path = raw_path.decode("utf-8")
        except UnicodeDecodeError:
            raise GitReplayUnsupportedError(
                f"commit {commit} touches a path that is not UTF-8: {raw_path!r:.120}",
                commit=commit,
            ) from None
        for mode in (old_mode, new_mode):
            if mode == _GITLINK:
                raise GitReplayUnsupportedError(
                    f"commit {commit} changes submodule {path!r}: submodules are not replayed",
                    commit=commit,
                )
            if mode == _SYMLINK:
                raise GitReplayUnsupportedError(
                    f"commit {commit} changes symlink {path!r}: symlinks are not replayed",
                    commit=commit,
                )
        if status not in ("A", "M", "D", "T"):
            raise GitReplayError(
                f"commit {commit} has diff status {status!r} for {path!r}", commit=commit
            )
        if status != "D" and new_mode not in (_REGULAR, _EXECUTABLE):
            raise GitReplayUnsupportedError(
                f"commit {commit} writes {path!r} with mode {new_mode}", commit=commit
            )
        entries.append(_Entry(status, old_mode, new_mode, new_oid, path))
    return entries


# --- resolving the range --------------------------------------------------------------------


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


# --- the planner ----------------------------------------------------------------------------


class GitHistoryPlanner:
    """Replays a commit range of ``source`` as commit actions (see :mod:`.git_history`).

    Args:
        source: the source repository (a work tree or bare repository).
        range: ``"A..B"`` or ``"last:N"``.
        risk: ``"low"``, ``"medium"`` or ``"high"``; the risk of every commit action.
    """

    kind = "git-history"

    def __init__(
        self, *, source: Path | str, range: str, risk: str = "low", setup: str = "none"
    ) -> None:
        self.source = Path(source)
        self.range = range
        self.risk = Risk(risk)
        self.setup = setup
        self._plan: PlannerState | None = None

    def _pinned(self) -> PlannerState:
        # Resolved once per planner object, so prepare_environment() and init_state() at run
        # creation see the same base even if the source's HEAD moves in between.
        if self._plan is None:
            base, tip, commits = resolve_range(self.source, self.range)
            raws = _cat_batch(self.source, commits, kind="commit")
            for raw, commit in zip(raws, commits, strict=True):
                parse_commit(raw, commit=commit)
            parent = base
            for commit in commits:
                _diff(self.source, parent, commit)
                parent = commit
            commit_list: list[JsonValue] = list(commits)
            self._plan = {
                "kind": self.kind,
                "source": str(self.source),
                "range": self.range,
                "base": base,
                "tip": tip,
                "commits": commit_list,
            }
        return self._plan

    def init_state(self) -> PlannerState:
        """Resolve and pin the range, scanning every commit so an unreplayable one fails now.

        Returns:
            ``{"kind", "source", "range", "base", "tip", "commits": [oldest, ..., tip]}``.

        Raises:
            GitReplayError: the source or range cannot be read.
            GitReplayUnsupportedError: a commit holds a submodule, symlink or non-UTF-8 text.
        """
        state = self._pinned()
        return {**state, "commits": list(state["commits"])}  # type: ignore[arg-type]

    def prepare_environment(self, target: Path | str) -> None:
        """With ``setup = "clone-at-base"``, create ``target`` as a clone at the pinned base.

        The range is resolved and scanned first, so a range that cannot be replayed fails
        before anything is created. With ``setup = "none"`` this does nothing.

        Raises:
            ReplayTargetNotEmptyError, GitReplayError, GitReplayUnsupportedError: see
                :func:`clone_at_base` and :meth:`init_state`.
        """
        if self.setup != "clone-at-base":
            return
        state = self._pinned()
        clone_at_base(source=self.source, base=str(state["base"]), target=Path(target))

    def propose(
        self,
        *,
        cursor: int,
        planner_state: Mapping[str, Any],
        observation: Observation,
        put_blob: PutBlob,
    ) -> Proposal:
        """The commit action re-creating commit ``cursor`` of the pinned list, or Done.

        The observation is not consulted: the plan is fixed at run creation, and whether the
        environment still matches it is the engine's check (DESIGN.md section 5).

        Raises:
            PlannerStateError: ``planner_state`` is not a git-history state.
            GitReplayError / GitReplayUnsupportedError: the source cannot be read as planned.
        """
        check_cursor(cursor)
        source, base, tip, commits = read_replay_state(planner_state)
        if cursor >= len(commits):
            return Done(reason=f"replayed {len(commits)} commits from {base[:12]} to {tip[:12]}")
        commit = commits[cursor]
        parent = base if cursor == 0 else commits[cursor - 1]
        (raw,) = _cat_batch(source, [commit], kind="commit")
        meta = parse_commit(raw, commit=commit)
        entries = _diff(source, parent, commit)
        deletes = sorted((e for e in entries if e.status == "D"), key=lambda e: e.path)
        writes = sorted((e for e in entries if e.status != "D"), key=lambda e: e.path)
        blobs = _cat_batch(source, [e.new_oid for e in writes], kind="blob")
        changes: list[JsonValue] = [{"op": "delete", "path": e.path} for e in deletes]
        for entry, data in zip(writes, blobs, strict=True):
            changes.append(
                {
                    "op": "write",
                    "path": entry.path,
                    "content": put_blob(data),
                    "executable": entry.new_mode == _EXECUTABLE,
                }
            )
        return Action(
            kind="commit",
            target="",
            params={
                "message": meta.message,
                "author_name": meta.author_name,
                "author_email": meta.author_email,
                "author_date": meta.author_date,
                "changes": changes,
            },
            risk=self.risk,
        )


def read_replay_state(state: Mapping[str, Any]) -> tuple[Path, str, str, list[str]]:
    """``(source, base, tip, commits)`` from a git-history planner state, shape-checked.

    Raises:
        PlannerStateError: the state was not made by this planner or is malformed.
    """
    if state.get("kind") != GitHistoryPlanner.kind:
        raise PlannerStateError("planner state was not made by the git-history planner")
    source, base, tip, commits = (state.get(k) for k in ("source", "base", "tip", "commits"))
    if (
        not isinstance(source, str)
        or not isinstance(base, str) or not _OID_RE.match(base)
        or not isinstance(tip, str) or not _OID_RE.match(tip)
        or not isinstance(commits, list) or not commits
        or not all(isinstance(c, str) and _OID_RE.match(c) for c in commits)
        or commits[-1] != tip
    ):
        raise PlannerStateError("git-history planner state is malformed")
    return Path(source), base, tip, list(commits)


# --- preparing the replay target ------------------------------------------------------------


def _replay_spec(spec: TaskSpec) -> GitHistoryPlannerSpec:
    if not isinstance(spec.planner, GitHistoryPlannerSpec):
        raise PlannerError("only a git-history task can prepare a clone-at-base target")
    return spec.planner


def prepare_target(
    spec: TaskSpec,
    target: Path | str,
    *,
    planner_state: Mapping[str, Any] | None = None,
    base_dir: Path | None = None,
) -> str:
    """Create ``target`` as a fresh clone of the spec's replay source at the range's base.

    Args:
        spec: a task spec with a git-history planner.
        target: the directory to create; may exist only as an empty directory.
        planner_state: the run's pinned planner state; its base is used when given, so the clone
            matches the plan even if the source's HEAD moved since the run was created.
        base_dir: resolves a relative ``planner.source`` (specs from ``load_task_spec`` are
            already absolute).

    Returns:
        The base commit id the target is checked out at.

    Raises:
        PlannerError: the spec has no git-history planner.
        ReplayTargetNotEmptyError, GitReplayError: see :func:`clone_at_base`.
    """
    planner = _replay_spec(spec)
    source = Path(planner.source)
    if not source.is_absolute() and base_dir is not None:
        source = Path(base_dir) / source
    if planner_state is not None:
        _, base, _, _ = read_replay_state(planner_state)
    else:
        base, _, _ = resolve_range(source, planner.range)
    clone_at_base(source=source, base=base, target=Path(target))
    return base


def clone_at_base(*, source: Path, base: str, target: Path) -> None:
    """Clone ``source`` into ``target`` and check out branch ``ratchet-replay`` at ``base``.

    The clone is made in a staging directory beside ``target`` (``git clone --no-local``:
    objects are copied, never hard-linked to the source), the ``origin`` remote is removed so
    nothing in the target can write back to the source, and the finished directory is renamed
    into place. A crash therefore leaves ``target`` absent (or still empty), never half-cloned.

    Args:
        source: the source repository.
        base: full commit id to check out.
        target: the directory to create; may exist only as an empty directory.

    Raises:
        ReplayTargetNotEmptyError: ``target`` exists and is not an empty directory.
        GitReplayError: cloning or checking out failed (the staging directory is removed).
    """
    if target.is_symlink() or (target.exists() and (not target.is_dir() or any(target.iterdir()))):
        raise ReplayTargetNotEmptyError(target=str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.clone-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        run_git(None, "clone", "--no-local", "--no-checkout", "--quiet", "--", str(source),
                str(staging))
        run_git(staging, "checkout", "--quiet", "-B", REPLAY_BRANCH, base)
        run_git(staging, "remote", "remove", "origin")
        head = run_git(staging, "rev-parse", "HEAD").decode("ascii").strip()
        if head != base:
            raise GitReplayError(f"clone is at {head}, expected base {base}")
        if target.exists() and any(target.iterdir()):
            raise ReplayTargetNotEmptyError(target=str(target))
        os.replace(staging, target)  # replaces an empty directory atomically on POSIX
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
