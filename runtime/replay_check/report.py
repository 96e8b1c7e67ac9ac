"""The replay check's result: the figures an operator compares across repositories, as a table
and as one JSON object (DESIGN.md section 8: recovery success, duplicates, cost)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from runtime.replay_check.audit import Check


@dataclass(frozen=True)
class ReplayCheckReport:
    """Everything ``manage.py replay_check`` prints.

    Attributes:
        source: the source repository path.
        range: the replayed range, pinned as ``<base>..<tip>``.
        run_id: the replay run (``None`` if it was never created).
        commits: source commits in the range.
        target_commits: commits the target gained on its first-parent line.
        seed: the kill RNG's seed.
        kills_requested, kills: kills asked for and delivered (a run that finishes first gets fewer).
        kills_in_git: kills delivered while a git process was alive in the child's group.
        children: child processes started (``run`` + every ``resume``).
        takeovers: children that stopped because their lease was held or lost, so the next took over.
        recoveries, recovery_failures: from the run's trace.
        duplicates: extra commits for an already used key (must be 0).
        unkeyed: target commits without a key (must be 0).
        phase, stop_reason: the run's final phase; ``frozen`` is True for needs_review/awaiting_approval.
        wall_seconds: the whole drive, kills and lease takeovers included.
        wall_ms_per_write: ``wall_seconds`` per commit the run made (per source commit if it
            made none), in milliseconds: the wall time *under kills*, takeovers and redone work
            included -- not the cost of a write.
        cost_commits: commits of the uninterrupted cost sample (0 when not measured).
        ms_per_write: the cost of a write: the uninterrupted replay of the sample, milliseconds
            per commit (``None`` when not measured or the sample did not complete).
        baseline_ms_per_commit: the plain git loop over the same sample, per commit.
        cost_ratio: ``ms_per_write / baseline_ms_per_commit``.
        wall_ratio: ``wall_ms_per_write / baseline_ms_per_commit`` (the killed run's wall time
            against the plain loop; what this report called the cost before).
        lease_seconds: the children's lease time to live.
        workdir: where the task, the target clone and the children's logs are.
        error: why the drive ended early, if it did.
        checks: every acceptance check.
    """

    source: str
    range: str
    run_id: str | None
    commits: int
    target_commits: int
    seed: int
    kills_requested: int
    kills: int
    kills_in_git: int
    children: int
    takeovers: int
    recoveries: int
    recovery_failures: int
    duplicates: int
    unkeyed: int
    phase: str
    stop_reason: str
    frozen: bool
    wall_seconds: float
    wall_ms_per_write: float
    cost_commits: int
    ms_per_write: float | None
    baseline_ms_per_commit: float | None
    cost_ratio: float | None
    wall_ratio: float | None
    lease_seconds: float
    workdir: str
    error: str = ""
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)

    def as_json(self) -> dict[str, Any]:
        """One JSON-ready dict: every attribute, ``checks`` as a list of objects, plus ``passed``."""
        body = asdict(self)
        body["checks"] = [asdict(check) for check in self.checks]
        body["passed"] = self.passed
        return body

    def table(self) -> str:
        """The human-readable report: figures, then one line per check, then PASS or FAIL."""
        cost = "not measured"
        if self.ms_per_write is not None and self.cost_ratio is not None:
            cost = (f"{self.ms_per_write:.1f} ms/write uninterrupted vs plain git "
                    f"{self.baseline_ms_per_commit:.1f} ms/commit ({self.cost_ratio:.1f}x), "
                    f"first {self.cost_commits} commits")
        under_kills = f"{self.wall_ms_per_write:.1f} ms/write wall time under kills"
        if self.wall_ratio is not None:
            under_kills += f" ({self.wall_ratio:.1f}x plain git)"
        under_kills += f", {self.kills} kills and {self.takeovers} takeovers included"
        rows = [
            ("source", f"{self.source} ({self.range})"),
            ("run", self.run_id or "-"),
            ("commits", f"{self.commits} source, {self.target_commits} replayed"),
            ("kills", f"{self.kills} of {self.kills_requested} (seed {self.seed}), {self.kills_in_git} inside git"),
            ("children", f"{self.children} ({self.takeovers} stopped on a held or lost lease)"),
            ("recoveries", f"{self.recoveries} ({self.recovery_failures} failed)"),
            ("duplicates", f"{self.duplicates} duplicate commits, {self.unkeyed} without a key"),
            ("final phase", f"{self.phase} ({self.stop_reason or '-'})" + (" FROZEN" if self.frozen else "")),
            ("wall time", f"{self.wall_seconds:.1f} s (lease {self.lease_seconds:g} s per takeover)"),
            ("cost", cost),
            ("under kills", under_kills),
            ("workdir", self.workdir),
        ]
        lines = [f"{name:12} {value}" for name, value in rows]
        if self.error:
            lines.append(f"{'error':12} {self.error}")
        lines.append("checks:")
        lines.extend(f"  [{'ok' if c.passed else 'FAIL'}] {c.name}: {c.detail}" for c in self.checks)
        lines.append("verdict: PASS" if self.passed else "verdict: FAIL")
        return "\n".join(lines)
