"""``manage.py recovery_stats``: recovery success rate, duration (median, p95), duplicates.

A recovery fails when the run freezes or fails before its next completed write (see
``runtime.observability.stats``; DESIGN.md section 8).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from runtime.observability.stats import recovery_stats


class Command(BaseCommand):
    help = "Print recovery metrics computed from stored trace events."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true")
        parser.add_argument("--run", action="append", dest="runs", help="restrict to these run ids")

    def handle(self, *args: Any, **options: Any) -> None:
        stats = recovery_stats(run_ids=options["runs"])
        if options["json"]:
            self.stdout.write(json.dumps(stats.as_dict(), sort_keys=True))
            return
        rate = "n/a" if stats.success_rate is None else f"{stats.success_rate:.1%}"
        med, p95 = (("n/a" if seconds is None else f"{seconds:.3f} s")
                    for seconds in (stats.duration_median_seconds, stats.duration_p95_seconds))
        self.stdout.write(f"recoveries: {stats.recoveries} ({stats.succeeded} succeeded, "
                          f"{stats.failed} failed, {stats.frozen} of those froze the run; "
                          f"{stats.open} not decided yet)")
        self.stdout.write(f"recovery success rate: {rate}")
        self.stdout.write(f"recovery duration: median {med}, p95 {p95}")
        self.stdout.write(f"duplicate submissions: {stats.duplicate_submissions} "
                          f"(audited runs: {stats.audited_runs})")
