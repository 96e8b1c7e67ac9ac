"""``manage.py trace RUN_ID``: print a run's trace and whether its hash chain verifies."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.evidence.trace import trace_verify
from runtime.models import Run, TraceEvent


class Command(BaseCommand):
    help = "Print a run's trace events and verify the hash chain (exit 1 if it does not verify)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id")
        parser.add_argument("--json", action="store_true", help="one JSON object per line")
        parser.add_argument("--type", default=None, help="only events of this type")

    def handle(self, *args: Any, **options: Any) -> None:
        run_id = options["run_id"]
        if not Run.objects.filter(run_id=run_id).exists():
            raise CommandError(f"run {run_id} not found")
        events = TraceEvent.objects.filter(run_id=run_id).order_by("seq")
        if options["type"]:
            events = events.filter(event_type=options["type"])
        for e in events.iterator():
            if options["json"]:
                self.stdout.write(json.dumps({"seq": e.seq, "type": e.event_type, "at": e.created_at.isoformat(),
                                              "environment_version": e.environment_version,
                                              "payload": e.payload, "hash": e.hash}, sort_keys=True))
            else:
                brief = json.dumps(e.payload, sort_keys=True)
                brief = brief if len(brief) <= 100 else brief[:97] + "..."
                self.stdout.write(f"{e.seq:>5}  {e.created_at:%Y-%m-%d %H:%M:%S}  {e.event_type:22}  "
                                  f"{(e.environment_version or '-')[:12]:12}  {brief}")
        report = trace_verify(run_id=run_id)
        if not report.ok:
            raise CommandError(f"trace hash chain BROKEN at seq {report.first_bad_seq}: {report.reason}")
        # With --json stdout stays pure JSON lines; the verdict goes to stderr.
        out = self.stderr if options["json"] else self.stdout
        out.write(f"trace hash chain verifies ({report.count} events)")
