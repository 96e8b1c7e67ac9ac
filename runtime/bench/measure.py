"""The child half of ``manage.py bench``: migrate the scratch database and measure each section."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from django.conf import settings
from django.core.management import call_command

from runtime.bench.attachments import attachments_measure
from runtime.bench.checkpoints import checkpoints_measure
from runtime.bench.floor import floor_measure
from runtime.bench.history import build_source_history, write_replay_task
from runtime.bench.long_run import long_run_measure
from runtime.bench.machine import machine_info
from runtime.bench.memory import memory_measure
from runtime.bench.orphaned import orphaned_measure
from runtime.bench.pages import pages_measure
from runtime.bench.recovery import recovery_measure
from runtime.bench.replay import replay_measure
from runtime.bench.report import BenchReport
from runtime.bench.scale import scale_measure
from runtime.bench.scratch import scratch_require
from runtime.bench.sizes import BenchSizes
from runtime.bench.storage import archive_measure, storage_measure
from runtime.bench.targets import targets_judge
from runtime.bench.trace import trace_measure

PROGRESS = Callable[[str], None]


def bench_run(*, sizes: BenchSizes, history: Path | None = None,
              progress: PROGRESS | None = None) -> BenchReport:
    """Migrate the scratch database and run every section; return the report.

    Only runs in the child :func:`runtime.bench.isolated.bench_run_isolated` starts.

    Args:
        sizes: what to measure.
        history: a git repository to replay the last ``sizes.commits`` commits of (None: build
            a generated one with :func:`runtime.bench.history.build_source_history`).
        progress: called with a short line before each section (the command prints it to stderr).

    Raises:
        BenchmarkScratchError: not connected to the scratch database the parent named.
        BenchmarkError: a section could not measure (a replay did not complete, a recovery
            froze, a child failed, the plain loop produced another tree).
    """
    scratch_require()
    say = progress or (lambda _line: None)
    call_command("migrate", verbosity=0, interactive=False)
    work = Path(settings.VAR_DIR) / "work"
    work.mkdir(parents=True, exist_ok=True)
    report = BenchReport(machine=machine_info(), sizes=asdict(sizes))

    say(f"floor: bare 1 KiB INSERT + COMMIT, {sizes.samples} samples")
    floor_ms = floor_measure(report=report, samples=sizes.samples)

    on = set(sizes.sections)
    if "checkpoints" in on:
        levels = ", ".join(str(n) for n in sizes.write_levels)
        say(f"checkpoint commit / seal / restore at {levels} executed writes")
        checkpoints_measure(report=report, sizes=sizes, floor_ms=floor_ms, work=work)

    if on & {"replay", "recovery", "memory", "storage"}:
        if history is None:
            say(f"building a {sizes.commits + 1}-commit source history")
            source = work / "source"
            build_source_history(path=source, commits=sizes.commits)
        else:
            source = history
        report.facts["replay_history"] = "generated" if history is None else history.name
        task = write_replay_task(directory=work / "replay", source=source, commits=sizes.commits)
        small_sizes = replace(sizes, recovery_commits=min(sizes.recovery_commits, sizes.commits))
        small = write_replay_task(directory=work / "replay-small", source=source,
                                  commits=small_sizes.recovery_commits)
        if "replay" in on:
            say(f"step throughput: replay of {sizes.commits} commits vs plain git, "
                f"x{sizes.repeat}, and the counts of one counted replay")
            replay_measure(report=report, sizes=sizes, source=source, task=task, work=work)
        if "storage" in on:
            say(f"storage: bytes and rows per commit of one replay of {sizes.commits} commits")
            storage_measure(report=report, sizes=sizes, task=task, work=work)
        if "recovery" in on:
            say(f"recovery: SIGKILL at the last write, resume until completed, x{sizes.repeat}")
            recovery_measure(report=report, sizes=small_sizes, task=small)
        if "memory" in on:
            say("peak RSS: child `manage.py run` of the small replay, and an idle "
                "`manage.py check`")
            memory_measure(report=report, sizes=small_sizes, task=small)

    if "trace" in on:
        say(f"trace verify: {sizes.trace_events} events, x{max(3, sizes.repeat)}")
        trace_measure(report=report, sizes=sizes)

    if "attachments" in on:
        say(f"attachments: {sizes.attachments} x 1 MiB put/get, x{sizes.repeat}")
        attachments_measure(report=report, sizes=sizes)

    if "orphans" in on:
        say(f"orphans: {sizes.orphans} runs of a dead worker, resumed by a 2-process Celery "
            "worker, then by resume --all-orphaned --jobs 2")
        orphaned_measure(report=report, sizes=sizes, work=work / "orphans")

    if "long-run" in on:
        say(f"long run: {sizes.long_run_steps} steps, worker RSS sampled every step "
            f"(budget {sizes.long_run_seconds:.0f} s)")
        long_run_measure(report=report, sizes=sizes, work=work)

    if "pages" in on:
        pages_measure(report=report, sizes=sizes, say=say)

    if "archive" in on:
        say(f"archive: {sizes.archive_runs} finished runs beside a live one")
        archive_measure(report=report, sizes=sizes, work=work / "archive")

    if "scale" in on:
        say(f"scale: {sizes.scale_runs} runs x {sizes.scale_writes} workspace writes by a "
            f"2-process Celery worker, and the DBOS peer, x{sizes.scale_repeat} interleaved")
        scale_measure(report=report, sizes=sizes, work=work / "scale")

    targets_judge(report)
    return report
