"""The cost of a write with nothing going wrong: the same replay, uninterrupted, and the plain
``git`` loop over the same commits (DESIGN.md section 8).

The killed run's wall time is not a cost figure: it holds the lease takeovers after every kill
(a whole lease time to live each) and the work a killed child had done and the next redoes. So
the check also replays the first ``commits`` commits of the range once more, in this process,
into a clone of its own, with no kill, and times only the drive (``run_advance``: every proposal,
checkpoint, receipt and post-state check; not the clone made at run creation). The plain git
loop (:mod:`.baseline`) times the same commits, so the ratio prices exactly-once, not the kills.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from runtime.engine import run_advance, run_start
from runtime.replay_check.baseline import Baseline, baseline_measure
from runtime.replay_check.repository import ReplayRange
from runtime.replay_check.task import write_replay_task


@dataclass(frozen=True)
class CostSample:
    """The uninterrupted replay of a sample and the plain git loop over it.

    Attributes:
        commits: commits in the sample (the first of the range).
        seconds: the uninterrupted drive's wall time, in seconds.
        phase: the sample run's final phase (``completed`` when it counts).
        baseline: the plain git loop over the same commits.
    """

    commits: int
    seconds: float
    phase: str
    baseline: Baseline

    @property
    def ms_per_write(self) -> float:
        return 1000.0 * self.seconds / max(self.commits, 1)

    @property
    def ratio(self) -> float:
        return self.ms_per_write / max(self.baseline.ms_per_commit, 1e-9)


def sample_range(replay: ReplayRange, commits: int) -> ReplayRange:
    """The first ``commits`` commits of ``replay`` (all of them when ``commits`` is 0 or more
    than it holds), as a range of their own."""
    picked = replay.commits if commits <= 0 else replay.commits[:commits]
    return ReplayRange(range=f"{replay.base}..{picked[-1]}", base=replay.base, tip=picked[-1],
                       commits=tuple(picked))


def cost_measure(*, source: Path, replay: ReplayRange, workdir: Path, commits: int) -> CostSample:
    """Replay the first ``commits`` commits of ``replay`` uninterrupted (a run of its own, task
    under ``workdir``) and time the plain git loop over them.

    Raises:
        GitReplayError: the source cannot be read. RatchetError: the run cannot be created.
    """
    sample = sample_range(replay, commits)
    task = write_replay_task(directory=workdir, source=source, range_=sample.range,
                             count=len(sample.commits))
    run_id = run_start(spec_path=task)
    started = time.perf_counter()
    report = run_advance(run_id=run_id)
    seconds = time.perf_counter() - started
    loop = baseline_measure(source=source, replay=sample, scratch=workdir / "baseline")
    return CostSample(commits=len(sample.commits), seconds=seconds, phase=report.phase,
                      baseline=loop)
