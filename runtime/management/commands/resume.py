"""``manage.py resume RUN_ID``: take the lease, restore the latest checkpoint, recover, drive on."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from runtime.management.commands.run import drive, print_verdict


class Command(BaseCommand):
    help = "Resume a run from its latest committed checkpoint, recovering any crash window."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id")
        parser.add_argument("--worker", default=None, help="worker id (default host:pid)")
        parser.add_argument("--max-steps", type=int, default=None)
        parser.add_argument("--wait", type=float, default=0.0,
                            help="seconds to wait for another worker's lease to expire (default 0)")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"run {options['run_id']}")
        report = drive(self, run_id=options["run_id"], worker=options["worker"], max_steps=options["max_steps"],
                       progress=not options["no_progress"], wait_seconds=options["wait"])
        print_verdict(self, report)
