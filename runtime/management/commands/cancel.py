"""``manage.py cancel RUN_ID``: ask a run to stop; the worker driving it settles and cancels."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.decisions.cancellation import run_request_cancel
from runtime.errors import RatchetError


class Command(BaseCommand):
    help = "Request cancellation of a run (any pending write is settled first, by key)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id")
        parser.add_argument("--by", default="cli", help="who asks (lands in the trace)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            phase = run_request_cancel(run_id=options["run_id"], requested_by=options["by"])
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        if phase == "cancelled":
            self.stdout.write(f"run {options['run_id']} cancelled")
        elif phase in ("running", "pending"):
            self.stdout.write(f"cancel requested for run {options['run_id']}: the worker driving it stops it")
        else:
            raise CommandError(f"run {options['run_id']} is {phase}: there is nothing to cancel")
