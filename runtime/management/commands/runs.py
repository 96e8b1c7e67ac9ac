"""``manage.py runs``: list runs with phase, generation, lease holder."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from runtime.models import Run


class Command(BaseCommand):
    help = "List runs (newest first)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--phase", default=None)
        parser.add_argument("--limit", type=int, default=50)

    def handle(self, *args: Any, **options: Any) -> None:
        runs = Run.objects.order_by("-created_at")
        if options["phase"]:
            runs = runs.filter(phase=options["phase"])
        self.stdout.write(f"{'run id':32}  {'phase':17}  {'gen':>4}  {'task':24}  {'stop reason':20}  lease holder")
        for run in runs[: options["limit"]]:
            self.stdout.write(
                f"{run.run_id:32}  {run.phase:17}  {run.generation:>4}  {run.task_id[:24]:24}  "
                f"{(run.stop_reason or '-')[:20]:20}  {run.owner_worker or '-'}"
            )
