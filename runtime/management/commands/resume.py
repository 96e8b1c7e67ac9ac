"""``manage.py resume RUN_ID``: take the lease, restore the latest checkpoint, recover, drive on.

Exit codes as ``manage.py run`` (``runtime.decisions.verdicts``): 0 only when the run completed.
``manage.py resume --all-orphaned [--jobs N]`` resumes every orphaned run once, without Celery
(``runtime.workers.orphans``).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.decisions.verdicts import EXIT_CODES_HELP
from runtime.management.cli_numbers import count, seconds
from runtime.management.run_driving import announce, drive, print_verdict
from runtime.workers.orphans import ERROR as ORPHAN_ERROR
from runtime.workers.orphans import OrphanOutcome, orphans_resume_all, orphans_summary


class Command(BaseCommand):
    help = "Resume a run from its latest committed checkpoint, recovering any crash window. " + EXIT_CODES_HELP

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", nargs="?", default=None)
        parser.add_argument("--all-orphaned", action="store_true",
                            help="resume every orphaned run (lease expired, or free and untouched for "
                                 "RATCHET_SWEEP_SECONDS) once each, without Celery; one line per run; "
                                 "exit 0 unless a run could not be driven (1)")
        parser.add_argument("--jobs", type=count(minimum=1), default=1,
                            help="with --all-orphaned: child processes driving runs at once (default 1)")
        parser.add_argument("--worker", default=None, help="worker id (default host:pid)")
        parser.add_argument("--max-steps", type=count(minimum=1), default=None,
                            help="stop after N (at least 1) committed steps")
        parser.add_argument("--wait", type=seconds(allow_zero=True), default=0.0,
                            help="seconds (finite, 0 or more) to wait for another worker's lease to expire "
                                 "(default 0)")
        parser.add_argument("--no-progress", action="store_true")
        parser.add_argument("--json", action="store_true",
                            help="print the verdict as one JSON object on stdout (the run id line goes to stderr)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["all_orphaned"] or options["run_id"] is None:
            resume_all_orphaned(self, options)
            return
        as_json = options["json"]
        announce(self, run_id=options["run_id"], as_json=as_json)
        report = drive(self, run_id=options["run_id"], worker=options["worker"], max_steps=options["max_steps"],
                       progress=not options["no_progress"], wait_seconds=options["wait"], as_json=as_json,
                       verify_trace=True)  # a person's resume checks the whole trace (DESIGN.md section 4.15)
        print_verdict(self, report, as_json=as_json)


def resume_all_orphaned(cmd: BaseCommand, options: dict[str, Any]) -> None:
    """``--all-orphaned``: resume each orphan once (``runtime.workers.orphans``); print a line per run."""
    if options["run_id"] is not None or not options["all_orphaned"]:
        raise CommandError("give either RUN_ID or --all-orphaned", returncode=2)

    def line(outcome: OrphanOutcome) -> None:
        tail = f" ({outcome.detail})" if outcome.detail else ""
        cmd.stdout.write(f"run {outcome.run_id}: {outcome.outcome}{tail}")

    outcomes = orphans_resume_all(jobs=options["jobs"], worker=options["worker"], on_outcome=line)
    cmd.stdout.write(orphans_summary(outcomes))
    if any(o.outcome == ORPHAN_ERROR for o in outcomes):
        raise CommandError("some orphaned runs could not be driven (see above)", returncode=1)
