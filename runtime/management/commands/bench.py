"""``manage.py bench [--quick] [--json FILE] [--markdown FILE] [--history REPO]``: measure Ratchet.

Prints a Markdown report: medians (p95 for latencies) with their ratio to a floor measured in the
same run (a bare 1 KiB INSERT + COMMIT), exact counts (statements, round trips, durable
transactions per checkpoint advance and per write action), ratios, and the cost targets
(``runtime/bench/targets.py``) met or not. Sections: the floor; checkpoint commit and restore at
0, 300 and 3,000 executed writes; a 300-commit git-history replay against a plain ``git commit``
loop; recovery after a SIGKILL; peak memory; trace verification; attachments; 1,000 orphaned
runs resumed by a two-process Celery worker and by ``resume --all-orphaned``; a 10,000-step
run's worker memory; 50 runs x 20 workspace writes by a two-process Celery worker against DBOS
doing the same (``scale``). Runs against a throwaway database on the same engine as ``DATABASE_URL``
(see ``runtime.bench``); the user's database is never opened.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.bench.isolated import bench_run_isolated
from runtime.bench.long_run import long_run_drive
from runtime.bench.measure import bench_run
from runtime.bench.scratch import scratch_require
from runtime.bench.sizes import SECTIONS, BenchSizes
from runtime.errors import RatchetError
from runtime.management.cli_numbers import count, seconds


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
        parser.add_argument("--repeat", type=count(minimum=1), default=None, metavar="N",
                            help="repetitions of whole-run measurements (default 5; --quick 2)")
        parser.add_argument("--commits", type=count(minimum=1), default=None, metavar="N",
                            help="commits of the replayed history (default 300; --quick 5)")
        parser.add_argument("--markdown", dest="markdown_file", default=None, metavar="FILE",
                            help="also write the Markdown report to FILE")
        parser.add_argument("--only", default=None, metavar="A,B",
                            help="run only these sections (the floor always runs): "
                                 + ", ".join(SECTIONS))
        parser.add_argument("--history", default=None, metavar="REPO",
                            help="replay the last --commits first-parent commits of this git "
                                 "repository instead of a generated history")
        parser.add_argument("--orphans", type=count(minimum=1), default=None, metavar="N",
                            help="orphaned runs resumed by the Celery worker (default 1000; --quick 6)")
        parser.add_argument("--long-run-steps", type=count(minimum=1), default=None, metavar="N",
                            help="steps of the worker-memory run (default 10000; --quick 40)")
        parser.add_argument("--long-run-seconds", type=seconds(allow_zero=False), default=None, metavar="S",
                            help="wall-clock budget of that run; it stops early and says so "
                                 "(default 900; --quick 120)")
        parser.add_argument("--scale-runs", type=count(minimum=1), default=None, metavar="N",
                            help="runs of the scale section (default 50; --quick 6)")
        parser.add_argument("--scale-writes", type=count(minimum=1), default=None, metavar="N",
                            help="workspace writes per scale run (default 20; --quick 5)")
        parser.add_argument("--scale-repeat", type=count(minimum=1), default=None, metavar="N",
                            help="interleaved repetitions of the scale section, Ratchet and "
                                 "the DBOS peer (default 5; --quick 2)")
        parser.add_argument("--archive-runs", type=count(minimum=1), default=None, metavar="N",
                            help="finished runs the archive section archives beside a live one "
                                 "(default 1000; --quick 5)")
        # Internal: set by the parent when it re-executes itself against the scratch database.
        parser.add_argument("--scratch-child", default=None, help=argparse.SUPPRESS)
        parser.add_argument("--sizes", default=None, help=argparse.SUPPRESS)
        parser.add_argument("--long-run-child", default=None, help=argparse.SUPPRESS)
        parser.add_argument("--long-run-out", default=None, help=argparse.SUPPRESS)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["long_run_child"]:
                # Internal: the worker-memory run's own process (runtime.bench.long_run).
                scratch_require()
                samples = long_run_drive(task=Path(options["long_run_child"]),
                                         steps=options["long_run_steps"],
                                         seconds=options["long_run_seconds"])
                Path(options["long_run_out"]).write_text(json.dumps(samples), encoding="utf-8")
                return
            sizes = BenchSizes.choose(quick=options["quick"], commits=options["commits"],
                                      repeat=options["repeat"], orphans=options["orphans"],
                                      long_run_steps=options["long_run_steps"],
                                      long_run_seconds=options["long_run_seconds"],
                                      scale_runs=options["scale_runs"],
                                      scale_writes=options["scale_writes"],
                                      scale_repeat=options["scale_repeat"],
                                      archive_runs=options["archive_runs"],
                                      sections=(options["only"].split(",") if options["only"]
                                                else None))
            history = Path(options["history"]).resolve() if options["history"] else None
            if options["scratch_child"]:
                if options["sizes"]:
                    sizes = BenchSizes(**json.loads(options["sizes"]))
                report = bench_run(sizes=sizes, history=history, progress=self._progress)
                Path(options["scratch_child"]).write_text(json.dumps(report.as_dict()),
                                                          encoding="utf-8")
                return
            report = bench_run_isolated(sizes=sizes, history=history)
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        rendered = report.render()
        self.stdout.write(rendered)
        if options["markdown_file"]:
            try:
                Path(options["markdown_file"]).write_text(rendered + "\n", encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"cannot write {options['markdown_file']}: {exc.strerror}") from None
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
