"""``manage.py discard_run RUN_ID --operator NAME``: remove a run that died before its first checkpoint."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.errors import RatchetError
from runtime.workers.run_discard import run_discard


class Command(BaseCommand):
    help = ("Discard a half-created run (listed by `manage.py runs --half-created`): its row, orphan "
            "checkpoints, trace and the clone run creation prepared for it. Refuses any run that "
            "committed a checkpoint or whose lease is still live; logs what it removed.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id")
        parser.add_argument("--operator", required=True, help="who discards the run (recorded in the log)")
        parser.add_argument("--keep-target", action="store_true",
                            help="leave the run's prepared environment directory in place")
        parser.add_argument("--json", action="store_true", help="print what was removed as one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = run_discard(run_id=options["run_id"], operator=options["operator"],
                                 remove_target=not options["keep_target"])
        except (RatchetError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(asdict(report), sort_keys=True) if options["json"] else report.line())
