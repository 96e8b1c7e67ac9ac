"""Verifiers: does the environment now hold what the task asked for?

:func:`verify` reads the adapter's target directly (read-only) and returns a
:class:`VerifierOutcome`. The engine records the verdict against the observation's version, and
a run completes only with a passing verdict at the final environment version (DESIGN.md section
6, completion evidence). A failed verdict is an answer; :class:`VerifierError` means the
verifier could not reach what it compares against (the source repository), which is not the
same thing and may be retried.

Verifier kinds (``[verifier] kind``):

- ``tree-equals-source``: the target's ``HEAD^{tree}`` equals the source tip's tree and the
  target's work tree is clean (no staged, unstaged or untracked changes).
- ``files-equal``: each listed file holds exactly the given UTF-8 text, and each ``absent`` path
  does not exist.
- ``always``: passes (demos and tests).

Framework-free: nothing here imports Django.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.errors import GitReplayError, PlannerStateError, VerifierError
from runtime.planners.git_history import read_replay_state, resolve_range, run_git, tree_of
from runtime.taskspec import (
    AlwaysVerifier,
    FilesEqualVerifier,
    GitHistoryPlannerSpec,
    TaskSpec,
    TreeEqualsSourceVerifier,
)

if TYPE_CHECKING:
    from runtime.adapters.base import Observation

MAX_DETAIL_ITEMS = 5
"""How many mismatching paths a detail message lists before summarising."""


@dataclass(frozen=True)
class VerifierOutcome:
    """A verdict and a short human-readable reason (at most a few hundred characters)."""

    passed: bool
    detail: str


def _listing(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_DETAIL_ITEMS])
    more = len(items) - MAX_DETAIL_ITEMS
    return shown + (f" and {more} more" if more > 0 else "")


def _source_tip(spec: TaskSpec, planner_state: Mapping[str, Any] | None,
                base_dir: Path | None) -> tuple[Path, str]:
    planner = spec.planner
    if not isinstance(planner, GitHistoryPlannerSpec):
        raise VerifierError("tree-equals-source needs a git-history planner")
    source = Path(planner.source)
    if not source.is_absolute() and base_dir is not None:
        source = Path(base_dir) / source
    try:
        if planner_state is not None:
            _, _, tip, _ = read_replay_state(planner_state)
        else:
            _, tip, _ = resolve_range(source, planner.range)
        return source, tree_of(source, tip)
    except (GitReplayError, PlannerStateError) as exc:
        raise VerifierError(f"cannot read the source tip: {exc.message}") from None


def _tree_equals_source(spec: TaskSpec, target: Path, planner_state: Mapping[str, Any] | None,
                        base_dir: Path | None, version: str) -> VerifierOutcome:
    _, want = _source_tip(spec, planner_state, base_dir)
    try:
        have = tree_of(target, "HEAD")
    except GitReplayError:
        return VerifierOutcome(False, f"target has no readable HEAD commit (version {version})")
    try:
        status = run_git(target, "status", "--porcelain", "-z", "--untracked-files=all")
    except GitReplayError as exc:
        return VerifierOutcome(False, f"cannot read the target's status: {exc.message}")
    dirty = [entry[3:].decode("utf-8", "replace") for entry in status.split(b"\x00")
             if len(entry) > 3 and entry[2:3] == b" "]
    if have != want:
        return VerifierOutcome(
            False, f"target tree {have[:12]} differs from source tip tree {want[:12]} "
            f"(version {version})"
        )
    if status.strip(b"\x00"):
        return VerifierOutcome(
            False, f"target tree matches but the work tree is not clean: {_listing(dirty)}"
        )
    return VerifierOutcome(
        True, f"target tree equals source tip tree {want[:12]} (version {version})"
    )


def _inside(root: Path, path: Path) -> bool:
    real_root = os.path.realpath(root)
    return os.path.commonpath([real_root, os.path.realpath(path)]) == real_root


def _files_equal(verifier: FilesEqualVerifier, target: Path, version: str) -> VerifierOutcome:
    problems: list[str] = []
    for rel, expected in sorted(verifier.files.items()):
        path = target / rel
        if not _inside(target, path):
            problems.append(f"{rel} (points outside the target)")
            continue
        try:
            actual = path.read_bytes()
        except FileNotFoundError:
            problems.append(f"{rel} (missing)")
            continue
        except OSError as exc:
            problems.append(f"{rel} (unreadable: {exc.strerror})")
            continue
        if actual != expected.encode("utf-8"):
            problems.append(f"{rel} (content differs)")
    for rel in verifier.absent:
        if os.path.lexists(target / rel):
            problems.append(f"{rel} (should not exist)")
    if problems:
        return VerifierOutcome(False, f"{len(problems)} file(s) wrong: {_listing(problems)}")
    checked = len(verifier.files) + len(verifier.absent)
    return VerifierOutcome(True, f"all {checked} expected files match (version {version})")


def verify(
    spec: TaskSpec,
    observation: Observation,
    adapter_target: Path | str,
    *,
    planner_state: Mapping[str, Any] | None = None,
    base_dir: Path | None = None,
) -> VerifierOutcome:
    """Run the spec's verifier against ``adapter_target`` (read-only).

    Args:
        spec: the run's task spec.
        observation: the observation the verdict is for; its ``version`` is named in the detail
            (the engine binds the verdict to that version).
        adapter_target: the directory the adapter acts on.
        planner_state: the run's pinned planner state; ``tree-equals-source`` then compares with
            the pinned tip instead of re-resolving the range (whose ``last:N`` moves with HEAD).
        base_dir: resolves a relative ``planner.source``.

    Returns:
        :class:`VerifierOutcome`; ``passed`` is False with a reason when the target differs.

    Raises:
        VerifierError: the source repository or pinned tip cannot be read.
    """
    target = Path(adapter_target)
    version = str(getattr(observation, "version", "?"))
    checker = spec.verifier
    if isinstance(checker, AlwaysVerifier):
        return VerifierOutcome(True, f"always passes (version {version})")
    if isinstance(checker, FilesEqualVerifier):
        return _files_equal(checker, target, version)
    if isinstance(checker, TreeEqualsSourceVerifier):
        return _tree_equals_source(spec, target, planner_state, base_dir, version)
    raise VerifierError(f"unknown verifier kind {getattr(checker, 'kind', None)!r}")
