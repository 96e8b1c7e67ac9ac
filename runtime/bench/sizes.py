"""How much one ``manage.py bench`` measures: :class:`BenchSizes`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from runtime.errors import BenchmarkError

SECTIONS = ("checkpoints", "replay", "recovery", "memory", "trace", "attachments", "orphans",
            "long-run", "pages", "scale", "storage", "archive")
"""The sections a bench can run (``--only`` picks some); the floor is always measured."""


@dataclass(frozen=True)
class BenchSizes:
    """How much each section measures.

    Attributes:
        commits: commits of the replayed history (300 in a full run), against a plain git loop.
        repeat: repetitions of the whole-run measurements (replay, plain git loop, recovery,
            trace verify, attachments); medians are over these.
        samples: calls per latency measurement (the floor; checkpoint commit and restore at
            every level, :meth:`samples_at`).
        write_levels: executed writes in the run's receipts ledger at which checkpoint commit
            and restore are measured (0, 300 and 3,000 in a full run).
        recovery_commits: commits of the run that is SIGKILLed and resumed, and of the peak-RSS
            run (small: these measure recovery, not throughput).
        trace_events: events in the run whose trace is verified.
        attachments: 1 MiB blobs put and got per repetition.
        orphans: runs orphaned by a dead worker, then resumed by a Celery worker with two pool
            processes (and, as many again, by ``resume --all-orphaned --jobs 2``).
        long_run_steps: committed steps of the run whose worker memory is sampled (10,000).
        long_run_seconds: wall-clock budget of that run; it stops early when spent and the
            report says how many steps it reached.
        scale_runs: runs of the ``scale`` section (and workflows of its DBOS peer).
        scale_writes: workspace writes per run (steps per peer workflow).
        archive_runs: finished runs the ``archive`` section archives (beside one live run).
        scale_repeat: interleaved repetitions of the ``scale`` section (Ratchet, then the peer);
            its medians are over these.
        sections: which of :data:`SECTIONS` to run (all by default).
    """

    commits: int = 300
    repeat: int = 3
    samples: int = 200
    write_levels: list[int] = field(default_factory=lambda: [0, 300, 3000])
    recovery_commits: int = 10
    trace_events: int = 2000
    attachments: int = 32
    orphans: int = 1000
    long_run_steps: int = 10000
    long_run_seconds: float = 900.0
    scale_runs: int = 50
    scale_writes: int = 20
    scale_repeat: int = 5
    archive_runs: int = 1000
    sections: list[str] = field(default_factory=lambda: list(SECTIONS))

    def samples_at(self, writes: int) -> int:
        """Latency samples at a level of ``writes`` executed writes: ``samples`` at every level.

        A commit no longer grows with the ledger (DESIGN.md section 3.1), so the large levels
        need not take fewer; equal counts keep the interleaved rounds of
        ``runtime.bench.checkpoints`` balanced. ``writes`` stays an argument for callers that
        size by level."""
        del writes
        return self.samples

    @classmethod
    def choose(cls, *, quick: bool, commits: int | None = None, repeat: int | None = None,
               orphans: int | None = None, long_run_steps: int | None = None,
               long_run_seconds: float | None = None, scale_runs: int | None = None,
               scale_writes: int | None = None, scale_repeat: int | None = None,
               archive_runs: int | None = None, sections: list[str] | None = None) -> BenchSizes:
        """Default sizes, or the small ``--quick`` ones; the arguments given override them.

        Raises:
            BenchmarkError: a size is below 1, or a section is not one of :data:`SECTIONS`.
        """
        base = (cls(commits=5, repeat=2, samples=20, write_levels=[0, 30], recovery_commits=3,
                    trace_events=200, attachments=4, orphans=6, long_run_steps=40,
                    long_run_seconds=120.0, scale_runs=6, scale_writes=5, scale_repeat=2,
                    archive_runs=5)
                if quick else cls())
        overrides = {"commits": commits, "repeat": repeat, "orphans": orphans,
                     "long_run_steps": long_run_steps, "long_run_seconds": long_run_seconds,
                     "scale_runs": scale_runs, "scale_writes": scale_writes,
                     "scale_repeat": scale_repeat, "archive_runs": archive_runs, "sections": sections}
        sizes = cls(**{**asdict(base), **{k: v for k, v in overrides.items() if v is not None}})
        if min(sizes.commits, sizes.repeat, sizes.orphans, sizes.long_run_steps,
               sizes.long_run_seconds, sizes.scale_runs, sizes.scale_writes,
               sizes.scale_repeat, sizes.archive_runs) < 1:
            raise BenchmarkError("commits, repeat, orphans, long-run steps and the scale sizes "
                                 "must be at least 1", commits=sizes.commits, repeat=sizes.repeat,
                                 orphans=sizes.orphans, long_run_steps=sizes.long_run_steps,
                                 scale_runs=sizes.scale_runs, scale_writes=sizes.scale_writes,
                                 scale_repeat=sizes.scale_repeat)
        unknown = sorted(set(sizes.sections) - set(SECTIONS))
        if unknown:
            raise BenchmarkError(f"unknown bench section(s) {', '.join(unknown)}; choose from "
                                 f"{', '.join(SECTIONS)}")
        return sizes
