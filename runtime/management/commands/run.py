"""``manage.py run TASK.toml``: start a run and drive it to the end, printing the run id first."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from runtime.engine import StepReport, run_advance, run_start
from runtime.errors import RatchetError


class Command(BaseCommand):
    help = "Start a run from a task spec (TOML) and drive it until it completes, fails or freezes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("task", help="path of the task spec TOML file")
        parser.add_argument("--worker", default=None, help="worker id (default host:pid)")
        parser.add_argument("--max-steps", type=int, default=None, help="stop after N committed steps")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            run_id = run_start(spec_path=options["task"], worker=options["worker"])
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        # The run id goes first and is flushed, so a caller can resume even if we are killed.
        self.stdout.write(f"run {run_id}")
        self.stdout.flush()
        report = drive(self, run_id=run_id, worker=options["worker"], max_steps=options["max_steps"],
                       progress=not options["no_progress"])
        print_verdict(self, report)


def drive(cmd: BaseCommand, *, run_id: str, worker: str | None, max_steps: int | None, progress: bool,
          wait_seconds: float = 0.0) -> StepReport:
    """Drive ``run_id`` with a progress bar on stderr; CommandError on a typed runtime error."""
    bar = tqdm(desc="steps", unit="step", file=sys.stderr, disable=not progress, dynamic_ncols=True)

    def on_step(report: StepReport) -> None:
        bar.update(1)
        bar.set_postfix(phase=report.phase, write=report.cursor)

    try:
        return run_advance(run_id=run_id, worker=worker, max_steps=max_steps, on_step=on_step,
                           wait_seconds=wait_seconds)
    except RatchetError as exc:
        raise CommandError(f"run {run_id}: {exc}") from None
    finally:
        bar.close()


def print_verdict(cmd: BaseCommand, report: StepReport) -> None:
    """Print the final phase; exit non-zero unless the run completed or is waiting for a human."""
    line = (f"verdict: {report.phase}" + (f" ({report.stop_reason})" if report.stop_reason else "")
            + f" generation={report.generation} writes={max(report.cursor, 0)}"
            + (" recovered" if report.recovered else ""))
    cmd.stdout.write(line)
    if report.phase in ("failed", "cancelled"):
        raise CommandError(line)
