"""``manage.py bench [--quick] [--json FILE] [--repeat N]``: measure Ratchet on this machine.

Prints a table of medians (p95 for latencies) and ratios: checkpoint commit and restore latency,
step throughput of a git-history replay against a plain ``git commit`` loop, recovery duration
after a SIGKILL, trace verification time, peak memory and attachment throughput. Runs against a
throwaway database on the same engine as ``DATABASE_URL`` (see ``runtime.benchmarks``); the
user's database is never opened.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.benchmarks import BenchSizes, bench_run, bench_run_isolated
from runtime.errors import RatchetError


class Command(BaseCommand):
    help = ("Benchmark checkpoints, exactly-once replay, recovery, trace verification, memory and "
            "attachments on a throwaway database of the configured engine; print medians.")
    # The parent never opens the user's database and must not create keys in the user's var
    # dir just to benchmark; the child checks its own scratch configuration.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--quick", action="store_true",
                            help="small sizes (5 commits, 2 repeats, 20 samples): a smoke run")
        parser.add_argument("--json", dest="json_file", default=None, metavar="FILE",
                            help="also write the full report as JSON to FILE")
        parser.add_argument("--repeat", type=int, default=None, metavar="N",
                            help="repetitions of whole-run measurements (default 5; --quick 2)")
        parser.add_argument("--commits", type=int, default=None, metavar="N",
                            help="commits per replayed history (default 30; --quick 5)")
        # Internal: set by the parent when it re-executes itself against the scratch database.
        parser.add_argument("--scratch-child", default=None, help=argparse.SUPPRESS)
        parser.add_argument("--sizes", default=None, help=argparse.SUPPRESS)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            sizes = BenchSizes.choose(quick=options["quick"], commits=options["commits"],
                                      repeat=options["repeat"])
            if options["scratch_child"]:
                if options["sizes"]:
                    sizes = BenchSizes(**json.loads(options["sizes"]))
                report = bench_run(sizes=sizes, progress=self._progress)
                Path(options["scratch_child"]).write_text(json.dumps(report.as_dict()),
                                                          encoding="utf-8")
                return
            report = bench_run_isolated(sizes=sizes)
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(report.render())
        if options["json_file"]:
            try:
                Path(options["json_file"]).write_text(
                    json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n",
                    encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"cannot write {options['json_file']}: {exc.strerror}") from None

    @staticmethod
    def _progress(line: str) -> None:
        print(f"bench: {line}", file=sys.stderr, flush=True)
