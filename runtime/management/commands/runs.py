"""``manage.py runs``: list runs with phase, generation, lease holder; ``--half-created`` lists the
runs that died before their first checkpoint (``runtime.workers.run_discard``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.errors import RatchetError
from runtime.management.cli_numbers import count
from runtime.models import Run
from runtime.workers.run_discard import run_find_half_created


class Command(BaseCommand):
    help = ("List runs (newest first). --half-created lists the runs that died before their first "
            "checkpoint, which `manage.py discard_run RUN_ID --operator NAME` removes.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--phase", default=None)
        parser.add_argument("--limit", type=count(minimum=1), default=50, help="at most N runs (default 50)")
        parser.add_argument("--half-created", action="store_true",
                            help="only runs that died before their first checkpoint (oldest first)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["half_created"]:
            self._half_created(limit=options["limit"])
            return
        runs = Run.objects.order_by("-created_at")
        if options["phase"]:
            runs = runs.filter(phase=options["phase"])
        self.stdout.write(f"{'run id':32}  {'phase':17}  {'gen':>4}  {'task':24}  {'stop reason':20}  lease holder")
        for run in runs[: options["limit"]]:
            self.stdout.write(
                f"{run.run_id:32}  {run.phase:17}  {run.generation:>4}  {run.task_id[:24]:24}  "
                f"{(run.stop_reason or '-')[:20]:20}  {run.owner_worker or '-'}"
            )

    def _half_created(self, *, limit: int) -> None:
        try:
            found = run_find_half_created(limit=limit)
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{'run id':32}  {'created (UTC)':19}  {'task':24}  {'hwm':12}  {'orphans':>7}  "
                          f"{'events':>6}  lease")
        for run in found:
            lease = f"live ({run.owner_worker})" if run.lease_live else "expired: can be discarded"
            self.stdout.write(
                f"{run.run_id:32}  {run.created_at:%Y-%m-%d %H:%M:%S}  {run.task_id[:24]:24}  {run.hwm:12}  "
                f"{run.orphan_checkpoints:>7}  {run.trace_events:>6}  {lease}"
            )
