"""Verifiers: does the environment now hold what the task asked for?

Verifiers are plug-ins of the ``ratchet.verifiers`` entry-point group (DESIGN.md section 5.10):
each declares its options model and is built with them and a :class:`VerifierContext`; its
``verify`` reads the adapter's target directly (read-only) and returns a
:class:`VerifierOutcome`. :func:`verify` runs the one the spec names. The engine records the
verdict against the observation's version, and a run completes only with a passing verdict at the
final environment version (DESIGN.md section 6, completion evidence). A failed verdict is an answer;
:class:`VerifierError` means the verifier could not reach what it compares against (the source
repository), which is not the same thing and may be retried.

Verifier kinds (``[verifier] kind``):

- ``tree-equals-source``: the target's ``HEAD^{tree}`` equals the source tip's tree -- the same
  id, or the same files, modes and ids where the source tree was written by an old git with
  modes current git no longer writes (``runtime.planners.git_history.source.same_tree_content``) -- and
  the target's work tree is clean (no staged, unstaged or untracked changes).
- ``files-equal``: each listed file holds exactly the given UTF-8 text, and each ``absent`` path
  does not exist.
- ``always``: passes (demos and tests).
- ``command``: runs a test command in the environment, exit code 0 passes
  (``runtime/verifiers/command.py``, DESIGN.md section 6.5); its output is an attachment.

Framework-free: nothing here imports Django.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from runtime.errors import GitReplayError, PlannerStateError, PluginError, PluginFailedError, VerifierError
from runtime.planners.git_history.replay_state import read_replay_state
from runtime.planners.git_history.source import resolve_range, run_git, same_tree_content, tree_of
from runtime.plugins.registry import VERIFIERS
from runtime.taskspec import (
    AlwaysVerifier,
    FilesEqualVerifier,
    GitHistoryPlannerSpec,
    TaskSpec,
    TreeEqualsSourceVerifier,
    spec_plugin,
)
from runtime.verifiers.base import (
    VerifierContext,
    VerifierOutcome,
    outcome_with_output,
)

if TYPE_CHECKING:
    from runtime.adapters.base import Observation

MAX_DETAIL_ITEMS = 5
"""How many mismatching paths a detail message lists before summarising."""


def _listing(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_DETAIL_ITEMS])
    more = len(items) - MAX_DETAIL_ITEMS
    return shown + (f" and {more} more" if more > 0 else "")


def _source_tip(spec: TaskSpec, planner_state: Mapping[str, Any] | None,
                base_dir: Path | None) -> tuple[Path, str]:
    if spec.planner.kind != "git-history":
        raise VerifierError("tree-equals-source needs a git-history planner")
    try:
        planner = GitHistoryPlannerSpec.model_validate(spec.planner.options_json())
    except ValidationError:
        raise VerifierError("the git-history planner's options no longer validate") from None
    source = Path(planner.source)
    if not source.is_absolute() and base_dir is not None:
        source = Path(base_dir) / source
    try:
        if planner_state is not None:
            tip = read_replay_state(planner_state).tip
        else:
            _, tip, _ = resolve_range(source, planner.range)
        return source, tree_of(source, tip)
    except (GitReplayError, PlannerStateError) as exc:
        raise VerifierError(f"cannot read the source tip: {exc.message}") from None


def _tree_equals_source(spec: TaskSpec, target: Path, planner_state: Mapping[str, Any] | None,
                        base_dir: Path | None, version: str) -> VerifierOutcome:
    source, want = _source_tip(spec, planner_state, base_dir)
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
    try:
        equal = same_tree_content(source, want, target, have)
    except GitReplayError as exc:
        raise VerifierError(f"cannot list the trees: {exc.message}") from None
    if not equal:
        return VerifierOutcome(
            False, f"target tree {have[:12]} differs from source tip tree {want[:12]} "
            f"(version {version})"
        )
    if status.strip(b"\x00"):
        return VerifierOutcome(
            False, f"target tree matches but the work tree is not clean: {_listing(dirty)}"
        )
    if have != want:
        return VerifierOutcome(
            True, f"target tree {have[:12]} holds the same files as source tip tree {want[:12]}, "
            f"which git wrote with modes it no longer writes (version {version})"
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


class AlwaysPasses:
    """``kind = "always"``: passes (demos and tests)."""

    Options = AlwaysVerifier

    def __init__(self, *, options: AlwaysVerifier, context: VerifierContext) -> None:
        self.options = options

    def verify(self, *, observation: Observation, target: Path,
               planner_state: Mapping[str, Any] | None) -> VerifierOutcome:
        """Always a pass, naming the observed version."""
        return VerifierOutcome(True, f"always passes (version {observation.version})")


class FilesEqual:
    """``kind = "files-equal"``: each listed file holds exactly its text; ``absent`` ones do not exist."""

    Options = FilesEqualVerifier

    def __init__(self, *, options: FilesEqualVerifier, context: VerifierContext) -> None:
        self.options = options

    def verify(self, *, observation: Observation, target: Path,
               planner_state: Mapping[str, Any] | None) -> VerifierOutcome:
        """Compare every listed path of ``target``."""
        return _files_equal(self.options, target, str(observation.version))


class TreeEqualsSource:
    """``kind = "tree-equals-source"``: the target's HEAD tree is the replayed source tip's tree."""

    Options = TreeEqualsSourceVerifier

    def __init__(self, *, options: TreeEqualsSourceVerifier, context: VerifierContext) -> None:
        self.spec = context.spec
        self.base_dir = context.base_dir

    def verify(self, *, observation: Observation, target: Path,
               planner_state: Mapping[str, Any] | None) -> VerifierOutcome:
        """Compare ``HEAD^{tree}`` with the pinned tip's tree; the work tree must be clean."""
        return _tree_equals_source(self.spec, target, planner_state, self.base_dir, str(observation.version))


def verify(
    spec: TaskSpec,
    observation: Observation,
    adapter_target: Path | str,
    *,
    planner_state: Mapping[str, Any] | None = None,
    base_dir: Path | None = None,
    put_blob: Callable[[bytes], str] | None = None,
) -> VerifierOutcome:
    """Run the spec's verifier plug-in against ``adapter_target`` (read-only).

    Args:
        spec: the run's task spec.
        observation: the observation the verdict is for; its ``version`` is named in the detail
            (the engine binds the verdict to that version).
        adapter_target: the directory the adapter acts on.
        planner_state: the run's planner state; ``tree-equals-source`` then compares with
            the pinned tip instead of re-resolving the range (whose ``last:N`` moves with HEAD).
        base_dir: resolves a relative ``planner.source`` (and the command verifier's
            ``allowed_workdirs``).
        put_blob: stores a verifier's output as an attachment (see :class:`VerifierContext`).

    Returns:
        :class:`VerifierOutcome`; ``passed`` is False with a reason when the target differs.
        When it carries an ``output_digest``, its detail names it (``output sha256:...``).

    Raises:
        VerifierError: the source repository or pinned tip cannot be read.
        VerifierCommandError (a PluginError): the command verifier's command could not run or
            did not finish (missing executable, timeout, working directory not allowed).
        PluginNotFoundError / PluginLoadError / PluginConstructionError: the verifier cannot be
            found, imported or built.
        PluginFailedError: the verifier raised anything else, or returned no VerifierOutcome.
    """
    loaded, options = spec_plugin(spec, "verifier")
    checker = loaded.build(options=options, context=VerifierContext(spec=spec, base_dir=base_dir,
                                                                    put_blob=put_blob))
    try:
        outcome = checker.verify(observation=observation, target=Path(adapter_target),
                                 planner_state=planner_state)
    except (VerifierError, PluginError):
        raise  # typed already: retryable, or a plug-in error the engine freezes the run on
    except Exception as exc:
        raise PluginFailedError(f"verifier {spec.verifier.kind!r} raised {type(exc).__name__}: {str(exc)[:300]}",
                                group=VERIFIERS, plugin=spec.verifier.kind) from exc
    if not isinstance(outcome, VerifierOutcome):
        raise PluginFailedError(f"verifier {spec.verifier.kind!r} returned {type(outcome).__name__}, "
                                "not a VerifierOutcome", group=VERIFIERS, plugin=spec.verifier.kind)
    return outcome_with_output(outcome)
