"""``manage.py run TASK.toml``: start a run and drive it to the end, printing the run id first.

The exit code says how the run ended (``runtime.decisions.verdicts``): 0 only when it completed.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from runtime.decisions.verdicts import EXIT_CODES_HELP
from runtime.engine import run_start
from runtime.errors import RatchetError
from runtime.management.cli_numbers import count
from runtime.management.run_driving import announce, drive, fail, print_verdict


class Command(BaseCommand):
    help = ("Start a run from a task spec (TOML) and drive it until it completes, fails or freezes. "
            + EXIT_CODES_HELP)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("task", help="path of the task spec TOML file")
        parser.add_argument("--worker", default=None, help="worker id (default host:pid)")
        parser.add_argument("--max-steps", type=count(minimum=1), default=None,
                            help="stop after N (at least 1) committed steps")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        parser.add_argument("--json", action="store_true",
                            help="print the verdict as one JSON object on stdout (the run id line goes to stderr)")

    def handle(self, *args: Any, **options: Any) -> None:
        as_json = options["json"]
        try:
            run_id = run_start(spec_path=options["task"], worker=options["worker"])
        except RatchetError as exc:
            fail(self, run_id=None, error=exc, as_json=as_json)
        announce(self, run_id=run_id, as_json=as_json)
        report = drive(self, run_id=run_id, worker=options["worker"], max_steps=options["max_steps"],
                       progress=not options["no_progress"], as_json=as_json)
        print_verdict(self, report, as_json=as_json)

