"""The chaos campaign: an uninterrupted baseline, then N killed-and-recovered runs, and a table.

DESIGN.md section 8.2. Everything random (kill moments, how many recoverers race) comes from
one seed; timing on a real machine still varies, as real crashes do.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from runtime.chaos.checks import RunChecks, chaos_checks
from runtime.chaos.drive import DriveLog, chaos_run_drive
from runtime.chaos.spec_copy import spec_copy
from runtime.models import Run, TraceEvent
from runtime.replay_check.chaos import KillPlan
from runtime.stats import recovery_stats


@dataclass(frozen=True)
class Violation:
    """One failed check of one run (``run``: its index; ``-1`` for the baseline)."""

    run: int
    run_id: str
    check: str
    detail: str


@dataclass
class ChaosReport:
    """The campaign's figures (seconds for durations) and every violation."""

    task: str
    seed: int
    runs: int = 0
    completed: int = 0
    kills: int = 0
    crash_point_kills: int = 0
    kills_in_git: int = 0
    children: int = 0
    recoveries: int = 0
    recoveries_succeeded: int = 0
    recoveries_failed: int = 0
    recoveries_open: int = 0
    success_rate: float | None = None
    duplicates: int = 0
    recovery_median_seconds: float | None = None
    recovery_p95_seconds: float | None = None
    progress_median_seconds: float | None = None
    progress_p95_seconds: float | None = None
    wall_seconds: float = 0.0
    workdir: str = ""
    violations: list[Violation] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.violations and self.runs > 0 and self.completed == self.runs

    def table(self) -> str:
        """The human-readable table, then each violation, then PASS or FAIL."""
        def sec(value: float | None) -> str:
            return "n/a" if value is None else f"{value:.3f} s"

        rate = "n/a" if self.success_rate is None else f"{self.success_rate:.1%}"
        rows = [
            ("task", self.task), ("seed", str(self.seed)),
            ("runs", f"{self.runs} ({self.completed} completed)"),
            ("kills", f"{self.kills} external SIGKILLs ({self.kills_in_git} inside git), "
                      f"{self.crash_point_kills} at named crash points"),
            ("children", str(self.children)),
            ("recoveries", f"{self.recoveries} decided: {self.recoveries_succeeded} succeeded, "
                           f"{self.recoveries_failed} failed ({self.recoveries_open} open)"),
            ("success rate", rate),
            ("duplicates", f"{self.duplicates} effects beyond the first per key"),
            ("recovery time", f"median {sec(self.recovery_median_seconds)}, p95 {sec(self.recovery_p95_seconds)} "
                              "(restore + re-observe, per recovery)"),
            ("kill->progress", f"median {sec(self.progress_median_seconds)}, p95 {sec(self.progress_p95_seconds)} "
                               "(lease expiry and takeover included)"),
            ("wall time", f"{self.wall_seconds:.1f} s"),
            ("workdir", self.workdir),
        ]
        lines = [f"{name:15} {value}" for name, value in rows]
        lines.extend(f"VIOLATION run {v.run} ({v.run_id}): {v.check}: {v.detail}" for v in self.violations[:50])
        if len(self.violations) > 50:
            lines.append(f"... and {len(self.violations) - 50} more violations")
        lines.append("verdict: PASS" if self.passed else "verdict: FAIL")
        return "\n".join(lines)


def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(sorted(values), n=100, method="inclusive")[94]


def _baseline(*, spec: Path, workdir: Path, env: Mapping[str, str]) -> tuple[str | None, RunChecks | None, str]:
    """Run the task once without kills; returns its run id, its checks and an error."""
    task, _ = spec_copy(spec=spec, directory=workdir / "baseline")
    done = subprocess.run([sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "run", str(task), "--json",
                           "--no-progress", "--worker", "chaos-baseline"], env=dict(env), cwd=settings.BASE_DIR,
                          capture_output=True, text=True, check=False)
    run_id = next((line.split()[1] for line in done.stderr.splitlines()
                   if line.startswith("run ") and len(line.split()) == 2), None)
    if run_id is None:
        return None, None, (done.stderr.strip().splitlines() or ["the baseline run was not created"])[-1]
    return run_id, chaos_checks(run_id=run_id, baseline_fingerprint=None, own_target=False), ""


def _seconds_per_generation(run_id: str) -> float:
    """The uninterrupted run's pace (seconds per committed generation), from its trace: sizes
    the kill windows so kills land inside the run, not after it."""
    stamps = list(TraceEvent.objects.filter(run_id=run_id, event_type="checkpoint.committed")
                  .order_by("seq").values_list("created_at", flat=True))
    if len(stamps) < 2:
        return 0.05
    return max(0.005, (stamps[-1] - stamps[0]).total_seconds() / (len(stamps) - 1))


def chaos_campaign(*, spec: Path, runs: int, kills: int, seed: int, recoverers: int = 1, lease_seconds: float = 1.0,
                   crash_points: list[str] | None = None, workdir: Path, env: Mapping[str, str] | None = None,
                   child_timeout: float = 600.0, on_run: Callable[[int, DriveLog, RunChecks], None] | None = None
                   ) -> ChaosReport:
    """Run ``spec`` once uninterrupted, then ``runs`` times under seeded kills, and check each run.

    Args:
        spec: any task spec file.
        runs: runs under kills (at least the number of ``crash_points``).
        kills: external SIGKILLs per run (fewer if the run finishes first).
        seed: seeds every random choice.
        recoverers: at most this many recoverers race after each kill (1..N, drawn per kill).
        lease_seconds: the children's lease time to live (a takeover waits for its expiry).
        crash_points: named crash points; run ``i`` also arms ``crash_points[i % len]``.
        workdir: task copies, targets and child logs (kept as evidence).
        env: the children's environment (default: this process's).
        child_timeout: seconds one run may take before the drive gives up on it.
        on_run: called after each run (progress output).

    Raises:
        ValueError: ``runs`` < 1, ``kills`` < 0, ``recoverers`` < 1 or a non-positive lease.
        TaskSpecError: the spec cannot be read.
    """
    if runs < 1 or kills < 0 or recoverers < 1 or not lease_seconds > 0:
        raise ValueError("runs >= 1, kills >= 0, recoverers >= 1 and lease_seconds > 0 are required")
    env = dict(env if env is not None else os.environ)
    points = list(crash_points or [])
    runs = max(runs, len(points))
    rng = random.Random(seed)
    report = ChaosReport(task=str(spec), seed=seed, workdir=str(workdir))
    started = time.monotonic()
    base_id, base_checks, error = _baseline(spec=spec, workdir=workdir, env=env)
    if base_checks is None or not base_checks.passed:
        failed = [c for c in (base_checks.checks if base_checks else ()) if not c.passed]
        report.violations.extend(Violation(-1, base_id or "-", c.name, c.detail) for c in failed)
        if base_checks is None:
            report.violations.append(Violation(-1, "-", "uninterrupted run", error))
        return report
    hint = Run.objects.filter(run_id=base_id).values_list("generation", flat=True).first() or 20
    pace = _seconds_per_generation(base_id)
    run_ids: list[str] = []
    progress: list[float] = []
    for index in range(runs):
        task, own = spec_copy(spec=spec, directory=workdir / f"run-{index:04d}")
        plan = KillPlan(kills=kills, seed=rng.randrange(2**32), git_share=0.0, seconds_per_generation=pace)
        log = chaos_run_drive(task=task, plan=plan, recoverers=recoverers, rng=rng, lease_seconds=lease_seconds,
                              env=env, logs=workdir / "logs", tag=f"{index:04d}",
                              crash_at=points[index % len(points)] if points else None,
                              generations_hint=hint, child_timeout=child_timeout)
        report.runs += 1
        report.kills += log.kills
        report.crash_point_kills += log.crash_point_kills
        report.kills_in_git += log.kills_in_git
        report.children += len(log.children)
        progress.extend(log.progress_seconds)
        if log.run_id is None or not Run.objects.filter(run_id=log.run_id).exists():
            report.violations.append(Violation(index, "-", "run created", log.error or "no run id"))
            continue
        run_ids.append(log.run_id)
        checks = chaos_checks(run_id=log.run_id, baseline_fingerprint=base_checks.fingerprint, own_target=own)
        report.completed += 1 if log.phase == "completed" else 0
        report.duplicates += checks.duplicates
        suffix = f" ({log.error})" if log.error else ""
        report.violations.extend(Violation(index, log.run_id, c.name, c.detail + suffix)
                                 for c in checks.checks if not c.passed)
        if on_run is not None:
            on_run(index, log, checks)
    stats = recovery_stats(run_ids=run_ids) if run_ids else None
    if stats is not None:
        report.recoveries, report.recoveries_succeeded = stats.recoveries, stats.succeeded
        report.recoveries_failed, report.recoveries_open = stats.failed, stats.open
        report.success_rate = stats.success_rate
        report.recovery_median_seconds = stats.duration_median_seconds
        report.recovery_p95_seconds = stats.duration_p95_seconds
        if stats.failed:
            report.violations.append(Violation(-1, "-", "recovery success rate",
                                               f"{stats.failed} of {stats.recoveries} recoveries failed"))
    report.progress_median_seconds = statistics.median(progress) if progress else None
    report.progress_p95_seconds = _p95(progress)
    report.wall_seconds = time.monotonic() - started
    return report
