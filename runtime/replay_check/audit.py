"""The exactly-once checks on a finished replay (DESIGN.md sections 5 and 8).

Everything is read from the repositories with plain ``git`` (``.repository``) and from the run
row and trace, never from what the engine says about itself:

* the run completed with its verifier passing, and is not frozen;
* the target's tip tree equals the source tip's tree (the same entries: old git wrote some tree
  objects non-canonically, and a replay rebuilds them canonically, with another id);
* exactly one target commit per source commit on the first-parent line, nothing merged in beside;
* target commit ``i`` has source commit ``i``'s tree (a replay in the right order, none skipped);
* target commit ``i`` reads in git as source commit ``i``: header bytes, message bytes around
  the receipt, git's trailer parse the source's followed by Ratchet's (``.fidelity``);
* every target commit carries exactly one ``Idempotency-Key`` (no commit without a key);
* each key is on exactly one commit (no duplicate effect);
* the work tree is clean and git left no lock file behind;
* the run's trace hash chain verifies.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from runtime.errors import RatchetError
from runtime.evidence.trace import trace_verify
from runtime.models import Run, TraceEvent
from runtime.replay_check.fidelity import fidelity_check
from runtime.replay_check.repository import (
    ReplayRange,
    commits_between,
    first_parent_trees,
    git,
    same_tree_content,
    target_commits,
    tree_of,
)


@dataclass(frozen=True)
class Check:
    """One acceptance check: its name, whether it passed, and what was seen."""

    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class Audit:
    """All checks plus the counts the report shows.

    Attributes:
        checks: every check, in the module docstring's order.
        target_commits: commits on the target's first-parent line after the base.
        duplicates: extra commits for keys that appear on more than one commit.
        unkeyed: target commits without a key.
        recoveries: ``recovery.succeeded`` events in the run's trace.
        recovery_failures: ``recovery.failed`` events.
        phase, stop_reason: the run row's.
    """

    checks: tuple[Check, ...]
    target_commits: int
    duplicates: int
    unkeyed: int
    recoveries: int
    recovery_failures: int
    phase: str
    stop_reason: str

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


def _lock_files(target: Path) -> list[str]:
    git_dir = target / ".git"
    if not git_dir.is_dir():
        return []
    return sorted(str(p.relative_to(target)) for p in git_dir.rglob("*.lock") if p.name != "ratchet.lock")


def replay_audit(*, run_id: str, source: Path, replay: ReplayRange, target: Path) -> Audit:
    """Check the replay of ``replay`` from ``source`` that run ``run_id`` made in ``target``.

    Returns:
        An :class:`Audit`; a git or database failure while checking becomes a failed check.
    """
    run = Run.objects.get(run_id=run_id)
    checks = [Check("run completed (verifier passed), not frozen",
                    run.phase == "completed" and run.stop_reason == "verified",
                    f"phase {run.phase} ({run.stop_reason or '-'})")]
    counts = {"target": 0, "duplicates": 0, "unkeyed": 0}
    try:
        checks.extend(_git_checks(source=source, replay=replay, target=target, counts=counts))
    except RatchetError as exc:
        checks.append(Check("target readable with git", False, str(exc)))
    chain = trace_verify(run_id=run_id)
    checks.append(Check("trace hash chain verifies", chain.ok, chain.reason or f"{chain.count} events"))
    events = Counter(TraceEvent.objects.filter(run_id=run_id, event_type__in=["recovery.succeeded", "recovery.failed"])
                     .values_list("event_type", flat=True))
    return Audit(
        checks=tuple(checks),
        target_commits=counts["target"],
        duplicates=counts["duplicates"],
        unkeyed=counts["unkeyed"],
        recoveries=events["recovery.succeeded"],
        recovery_failures=events["recovery.failed"],
        phase=run.phase,
        stop_reason=run.stop_reason,
    )


def _git_checks(*, source: Path, replay: ReplayRange, target: Path, counts: dict[str, int]) -> list[Check]:
    checks = []
    want, got = tree_of(source, replay.tip), tree_of(target, "HEAD")
    tip_equal = same_tree_content(source, want, target, got)
    checks.append(Check("tip tree equals the source tip's tree", tip_equal,
                        f"source {want[:12]}, target {got[:12]}"
                        + (" (same entries; the source's tree objects are not canonical)" if tip_equal and want != got
                           else "")))

    made = target_commits(target, replay.base)
    counts["target"] = len(made)
    beside = commits_between(target, replay.base) - len(made)
    checks.append(Check("one target commit per source commit", len(made) == len(replay.commits) and beside == 0,
                        f"{len(replay.commits)} source, {len(made)} target first-parent"
                        + (f", {beside} merged in beside" if beside else "")))

    source_trees = [tree for _, tree in first_parent_trees(source, replay.base, replay.tip)]
    pairs = list(zip(source_trees, (c.tree for c in made), strict=False))
    other_ids = [i for i, (s, t) in enumerate(pairs) if s != t]
    wrong = [i for i in other_ids if not same_tree_content(source, pairs[i][0], target, pairs[i][1])]
    compared = f"{len(pairs)} of {len(source_trees)} compared"
    if wrong:
        detail = (f"{len(wrong)} differ, first at source commit {replay.commits[wrong[0]][:12]} (#{wrong[0] + 1}); "
                  f"{compared}")
    else:
        detail = f"all equal, {compared}" + (f" ({len(other_ids)} with the same entries under a canonical tree id)"
                                             if other_ids else "")
    checks.append(Check("each target commit has its source commit's tree",
                        not wrong and len(source_trees) == len(made), detail))

    fidelity = fidelity_check(source=source, base=replay.base, tip=replay.tip, target=target,
                              targets=[c.commit for c in made])
    checks.append(Check("each target commit reads in git as its source commit (header, message, trailers)",
                        fidelity.passed, fidelity.detail()))

    unkeyed = [c.commit for c in made if len(c.keys) != 1]
    counts["unkeyed"] = sum(1 for c in made if not c.keys)
    checks.append(Check("every target commit carries exactly one idempotency key", not unkeyed,
                        "all keyed" if not unkeyed else f"{len(unkeyed)} commits, first {unkeyed[0][:12]}"))

    per_key = Counter(key for c in made for key in c.keys)
    duplicates = sum(n - 1 for n in per_key.values() if n > 1)
    counts["duplicates"] = duplicates
    checks.append(Check("one commit per idempotency key", duplicates == 0,
                        f"{len(per_key)} keys, {duplicates} duplicate commits"))

    dirty = git(target, "status", "--porcelain", "--untracked-files=all", "--ignore-submodules=none").splitlines()
    locks = _lock_files(target)
    checks.append(Check("work tree clean, no git lock file left", not dirty and not locks,
                        "clean" if not dirty and not locks else f"{len(dirty)} dirty paths, locks {locks[:3]}"))
    return checks
