"""``manage.py second_chance``: the run page's second chances on the command line (DESIGN.md section 6.12).

``resume RUN_ID --by NAME`` queues a run stopped for an infrastructure reason once this process
finds the cause gone (``manage.py resume RUN_ID`` drives a run here instead); ``again RUN_ID --by
NAME`` starts a new run with the same spec as a failed or cancelled run and prints its id.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.decisions.second_chances import run_again, run_resume_request
from runtime.errors import RatchetError


class Command(BaseCommand):
    help = ("Second chances: `resume RUN_ID --by NAME` (a run stopped for an infrastructure reason, once the "
            "cause is gone), `again RUN_ID --by NAME` (a failed or cancelled run, as a new run with the same spec).")

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        for name in ("resume", "again"):
            p = sub.add_parser(name)
            p.add_argument("run_id")
            p.add_argument("--by", required=True, help="who asks (traced on the run)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["action"] == "resume":
                stop = run_resume_request(run_id=options["run_id"], requested_by=options["by"])
                self.stdout.write(f"run {options['run_id']}: resume requested ({stop.event} lifted); queued")
                return
            new_id = run_again(run_id=options["run_id"], requested_by=options["by"])
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(new_id)
