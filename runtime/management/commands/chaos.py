"""``manage.py chaos TASK``: any task spec under seeded external SIGKILLs (DESIGN.md section 8.2).

Prints a table (kills, recoveries, success rate, duplicates, median and p95 recovery time) and
exits 1 on any violation: a run not completed, a final environment that differs from the
uninterrupted run's, a second effect for a key in the adapter's records, a generation rollback,
a completion not bound to the final environment version, a failed recovery.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.chaos.campaign import chaos_campaign


def _crash_points() -> list[str]:
    import runtime.adapters.git  # noqa: F401  (modules register their points on import)
    import runtime.adapters.workspace  # noqa: F401
    import runtime.checkpoints  # noqa: F401
    import runtime.engine  # noqa: F401
    from runtime.core.crashpoints import CRASH_POINTS

    return sorted(CRASH_POINTS)


class Command(BaseCommand):
    help = "Run a task under seeded SIGKILLs, recover with 1..N concurrent workers, check every run."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("task", help="path of the task spec")
        parser.add_argument("--runs", type=int, default=10, help="runs under kills (default 10)")
        parser.add_argument("--kills", type=int, default=3, help="external SIGKILLs per run (default 3)")
        parser.add_argument("--seed", type=int, default=1, help="seeds every random choice (default 1)")
        parser.add_argument("--recoverers", type=int, default=1,
                            help="at most N recoverers race after each kill (drawn in 1..N; default 1)")
        parser.add_argument("--lease-seconds", type=float, default=1.0,
                            help="children's lease TTL in seconds; a takeover waits for it (default 1)")
        parser.add_argument("--crash-points", action="store_true",
                            help="also arm every named crash point, one per run (runs >= number of points)")
        parser.add_argument("--workdir", default=None, help="keep task copies, targets and logs here")
        parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run before giving up")
        parser.add_argument("--json", action="store_true", help="print the report as one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        workdir = Path(options["workdir"] or tempfile.mkdtemp(prefix="ratchet-chaos-"))
        task = Path(options["task"])
        if not task.is_file():
            raise CommandError(f"no task spec at {task}", returncode=2)

        def progress(index: int, log: Any, checks: Any) -> None:
            if not options["json"]:
                self.stderr.write(f"run {index}: {log.run_id} {log.phase}, {log.kills} kills, "
                                  f"{len(log.children)} children, {'ok' if checks.passed else 'VIOLATION'}")

        try:
            report = chaos_campaign(spec=task, runs=options["runs"], kills=options["kills"], seed=options["seed"],
                                    recoverers=options["recoverers"], lease_seconds=options["lease_seconds"],
                                    crash_points=_crash_points() if options["crash_points"] else None,
                                    workdir=workdir, child_timeout=options["timeout"], on_run=progress)
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        if options["json"]:
            body = asdict(report)
            body["passed"] = report.passed
            self.stdout.write(json.dumps(body, sort_keys=True, default=str))
        else:
            self.stdout.write(report.table())
        if not report.passed:
            raise CommandError("chaos found violations", returncode=1)
