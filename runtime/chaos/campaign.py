"""The chaos campaign: an uninterrupted baseline, then N killed-and-recovered runs, and a table.

DESIGN.md section 8.2. Everything random (kill moments, how many recoverers race) comes from
one seed; timing on a real machine still varies, as real crashes do.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runtime.chaos.celery_drive import chaos_celery_drive
from runtime.chaos.checks import RunChecks, chaos_checks
from runtime.chaos.drive import DriveLog, KillSchedule, chaos_run_drive
from runtime.chaos.faults import THROUGH_CELERY, FaultInjector
from runtime.chaos.spec_copy import spec_copy
from runtime.errors import ChaosSetupError
from runtime.models import Run, TraceEvent
from runtime.observability.stats import recovery_stats


@dataclass(frozen=True)
class Violation:
    """One failed check of one run (``run``: its index; ``-1`` for the baseline)."""

    run: int
    run_id: str
    check: str
    detail: str


@dataclass
class ChaosReport:
    """The campaign's figures (seconds for durations) and every violation.

    ``kills_requested`` is runs x kills; ``kills_delivered`` counts the SIGKILLs that landed
    while work remained in the runs that count; ``retried`` counts attempts whose run stopped
    before all its kills landed (checked like any run, then run again with a tighter schedule);
    ``kills_total`` is every delivered SIGKILL, retried attempts included.
    """

    task: str
    seed: int
    store: str = ""
    runs: int = 0
    attempts: int = 0
    completed: int = 0
    kills_per_run: int = 0
    kills_requested: int = 0
    kills_delivered: int = 0
    kills_total: int = 0
    retried: int = 0
    late_kills: int = 0
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
    load_average: tuple[float, float, float] | None = None
    workdir: str = ""
    faults: dict[str, int] = field(default_factory=dict)
    """Delivered faults per kind in the runs that count (``sigkill`` included; DESIGN.md section 8.8)."""
    violations: list[Violation] = field(default_factory=list)

    @property
    def short_of_kills(self) -> bool:
        """Fewer kills landed than were requested: the campaign did not test what was asked."""
        return self.kills_delivered < self.kills_requested

    @property
    def passed(self) -> bool:
        return (not self.violations and self.runs > 0 and self.completed == self.runs
                and not self.short_of_kills)

    def verdict(self) -> str:
        """``PASS``, or ``FAIL`` with the reason (violations first, then missing kills)."""
        if self.violations or self.runs == 0 or self.completed != self.runs:
            return f"FAIL: {len(self.violations)} violations, {self.completed} of {self.runs} runs completed"
        if self.short_of_kills:
            return (f"FAIL: only {self.kills_delivered} of {self.kills_requested} requested kills landed "
                    f"({self.retried} runs retried); the task finishes too soon for {self.kills_per_run} "
                    "kills per run: use a longer task or fewer --kills")
        return "PASS"

    def table(self) -> str:
        """The human-readable table, then each violation, then the verdict."""
        def sec(value: float | None) -> str:
            return "n/a" if value is None else f"{value:.3f} s"

        rate = "n/a" if self.success_rate is None else f"{self.success_rate:.1%}"
        load = "n/a" if self.load_average is None else " / ".join(f"{v:.2f}" for v in self.load_average)
        rows = [
            ("task", self.task), ("seed", str(self.seed)), ("store", self.store),
            ("runs", f"{self.runs} ({self.completed} completed; {self.attempts} attempts, "
                     f"{self.retried} retried because the run finished before its kills)"),
            ("kills", f"{self.kills_delivered} delivered of {self.kills_requested} requested "
                      f"({self.kills_per_run} per run); {self.kills_total} in all "
                      f"({self.kills_in_git} inside git, {self.late_kills} late, not counted), "
                      f"{self.crash_point_kills} at named crash points"),
            ("faults", ", ".join(f"{kind} {count}" for kind, count in sorted(self.faults.items())) or "-"),
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
            ("load average", f"{load} (1 / 5 / 15 min, at the end)"),
            ("workdir", self.workdir),
        ]
        lines = [f"{name:15} {value}" for name, value in rows]
        lines.extend(f"VIOLATION run {v.run} ({v.run_id}): {v.check}: {v.detail}" for v in self.violations[:50])
        if len(self.violations) > 50:
            lines.append(f"... and {len(self.violations) - 50} more violations")
        lines.append(f"verdict: {self.verdict()}")
        return "\n".join(lines)


def _p95(values: list[float]) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(sorted(values), n=100, method="inclusive")[94]


_ATTEMPTS = 4
"""Attempts per run: a run that stopped before all its kills landed is run again, its kill
schedule tightened (half the window each time); after the last the report is short of kills."""


def _baseline(*, spec: Path, workdir: Path, env: Mapping[str, str], lease_seconds: float,
              child_timeout: float, drive: Callable[..., DriveLog] = chaos_run_drive,
              injector: FaultInjector | None = None) -> tuple[str, RunChecks]:
    """Run the task once without kills, driven like every other run; returns its id and checks.

    Raises:
        ChaosSetupError: the run could not be created or did not complete on its own.
    """
    task, _ = spec_copy(spec=spec, directory=workdir / "baseline")
    log = drive(task=task, plan=KillSchedule(kills=0, generations=1, seconds_per_generation=0.0,
                                             rng=random.Random(0)),
                recoverers=1, rng=random.Random(0), lease_seconds=lease_seconds, env=env,
                logs=workdir / "logs", tag="baseline", child_timeout=child_timeout, injector=injector)
    if log.run_id is None or not Run.objects.filter(run_id=log.run_id).exists():
        raise ChaosSetupError(f"the uninterrupted run was not created: {log.error or 'no run id'}",
                              task=spec.name)
    if log.phase != "completed":
        raise ChaosSetupError(f"the uninterrupted run stopped as {log.phase}, not completed"
                              f"{': ' + log.error if log.error else ''}", task=spec.name, run_id=log.run_id)
    return log.run_id, chaos_checks(run_id=log.run_id, baseline_fingerprint=None, own_target=False)


def _seconds_per_generation(run_id: str) -> float:
    """The uninterrupted run's pace (seconds per committed generation), from its trace: sizes
    the kill windows so kills land inside the run, not after it."""
    stamps = list(TraceEvent.objects.filter(run_id=run_id, event_type="checkpoint.committed")
                  .order_by("seq").values_list("created_at", flat=True))
    if len(stamps) < 2:
        return 0.05
    return max(0.005, (stamps[-1] - stamps[0]).total_seconds() / (len(stamps) - 1))


def chaos_campaign(*, spec: Path, runs: int, kills: int, seed: int, recoverers: int = 1, lease_seconds: float = 3.0,
                   crash_points: list[str] | None = None, workdir: Path, env: Mapping[str, str] | None = None,
                   child_timeout: float = 600.0, store: str = "",
                   on_run: Callable[[int, DriveLog, RunChecks], None] | None = None,
                   fault_kinds: tuple[str, ...] = ("sigkill",), injector: FaultInjector | None = None) -> ChaosReport:
    """Run ``spec`` once uninterrupted, then ``runs`` times under seeded kills, and check each run.

    Args:
        spec: any task spec file whose uninterrupted run completes on its own.
        runs: runs under kills (at least the number of ``crash_points``).
        kills: external SIGKILLs per run; a run that stops before they all landed is retried
            (up to ``_ATTEMPTS`` times); the report says how many landed.
        seed: seeds every random choice.
        recoverers: at most this many recoverers race after each kill (1..N, drawn per kill).
        lease_seconds: the children's lease time to live (a takeover waits for its expiry).
        crash_points: named crash points; run ``i`` also arms ``crash_points[i % len]``.
        workdir: task copies, targets and child logs (kept as evidence).
        env: the children's environment (default: this process's).
        child_timeout: seconds one run may take before the drive gives up on it.
        store: names the database the runs went to, for the table.
        on_run: called after each attempt (progress output).
        fault_kinds: what each of the ``kills`` is, taken in turn (``runtime.chaos.faults``). With
            ``broker-restart`` among them every run, the baseline included, is driven through
            Celery (``runtime.chaos.celery_drive``), the other kinds then hitting its worker.
        injector: injects the kinds other than ``sigkill``; its ``check`` is called first.

    Raises:
        ValueError: ``runs`` < 1, ``kills`` < 0, ``recoverers`` < 1 or a non-positive lease.
        TaskSpecError: the spec cannot be read.
        ChaosSetupError: the uninterrupted run was not created or did not complete, a fault
            kind cannot be injected here, or crash points were asked for with ``broker-restart``.
    """
    if set(fault_kinds) - {"sigkill"}:
        if injector is None:
            raise ValueError("faults other than sigkill need an injector")
        injector.check(list(fault_kinds))
    celery = bool(THROUGH_CELERY & set(fault_kinds))
    if celery and crash_points:
        raise ChaosSetupError("--crash-points arms run/resume children; a campaign with broker-restart "
                              "drives its runs through a Celery worker: run them as two campaigns")
    drive = chaos_celery_drive if celery else chaos_run_drive
    if runs < 1 or kills < 0 or recoverers < 1 or not lease_seconds > 0:
        raise ValueError("runs >= 1, kills >= 0, recoverers >= 1 and lease_seconds > 0 are required")
    env = dict(env if env is not None else os.environ)
    points = list(crash_points or [])
    runs = max(runs, len(points))
    rng = random.Random(seed)
    report = ChaosReport(task=str(spec), seed=seed, store=store, workdir=str(workdir), kills_per_run=kills,
                         kills_requested=runs * kills)
    started = time.monotonic()
    base_id, base_checks = _baseline(spec=spec, workdir=workdir, env=env, lease_seconds=lease_seconds,
                                     child_timeout=child_timeout, drive=drive, injector=injector)
    report.violations.extend(Violation(-1, base_id, c.name, c.detail) for c in base_checks.checks if not c.passed)
    if report.violations:
        return report
    generations = Run.objects.filter(run_id=base_id).values_list("generation", flat=True).first() or 1
    pace = _seconds_per_generation(base_id)
    run_ids: list[str] = []
    progress: list[float] = []
    for index in range(runs):
        scale = 1.0
        for attempt in range(_ATTEMPTS):
            name = f"run-{index:04d}" + (f"-retry{attempt}" if attempt else "")
            task, own = spec_copy(spec=spec, directory=workdir / name)
            plan = KillSchedule(kills=kills, generations=generations, seconds_per_generation=pace,
                                rng=random.Random(rng.randrange(2**32)), scale=scale)
            log = drive(task=task, plan=plan, recoverers=recoverers, rng=rng, lease_seconds=lease_seconds,
                        env=env, logs=workdir / "logs", tag=name.removeprefix("run-"),
                        crash_at=points[index % len(points)] if points else None,
                        child_timeout=child_timeout, fault_kinds=fault_kinds, injector=injector)
            report.attempts += 1
            report.kills_total += log.kills
            report.late_kills += log.late_kills
            report.crash_point_kills += log.crash_point_kills
            report.kills_in_git += log.kills_in_git
            report.children += len(log.children)
            progress.extend(log.progress_seconds)
            if log.run_id is None or not Run.objects.filter(run_id=log.run_id).exists():
                report.violations.append(Violation(index, "-", "run created", log.error or "no run id"))
                break
            run_ids.append(log.run_id)
            checks = chaos_checks(run_id=log.run_id, baseline_fingerprint=base_checks.fingerprint, own_target=own)
            report.duplicates += checks.duplicates
            suffix = f" ({log.error})" if log.error else ""
            report.violations.extend(Violation(index, log.run_id, c.name, c.detail + suffix)
                                     for c in checks.checks if not c.passed)
            if on_run is not None:
                on_run(index, log, checks)
            if log.missed == 0 or log.error or not checks.passed or attempt == _ATTEMPTS - 1:
                break
            report.retried += 1
            scale /= 2
        report.runs += 1
        report.completed += 1 if log.phase == "completed" else 0
        report.kills_delivered += log.kills
        for kind, count in log.faults.items():
            report.faults[kind] = report.faults.get(kind, 0) + count
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
    report.load_average = os.getloadavg()
    return report
