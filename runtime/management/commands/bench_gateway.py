"""``manage.py bench_gateway [--calls N] [--clients 1,8,32] [--json FILE]``: the agent gateway's
overhead over a direct adapter call, its calls per second, and the exact counts of one call
(statements, round trips, durable transactions, client fsyncs) in-process, through the JSON API
and MCP beside the engine's write action (``runtime.bench.gateway``), on a throwaway database of
the configured engine."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.errors import RatchetError
from runtime.management.cli_numbers import count


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


class Command(BaseCommand):
    help = "Benchmark the agent gateway: call overhead (median, p95) and calls/s for 1, 8, 32 clients."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--calls", type=count(minimum=1), default=100,
                            help="calls per measurement (default 100; any number: the child's rate "
                                 "limit is raised to fit)")
        parser.add_argument("--clients", default="1,8,32", help="concurrent clients (default 1,8,32)")
        parser.add_argument("--json", dest="json_file", default=None, metavar="FILE")
        parser.add_argument("--processes", type=count(minimum=1), default=2,
                            help="also measure calls/s with the clients spread over this many processes "
                                 "(default 2; 1: threads of one process only)")
        parser.add_argument("--child", default=None, help="(internal) measure and write the report here")
        parser.add_argument("--clients-child", default=None, help="(internal) run the clients this plan names")

    def handle(self, *args: Any, **options: Any) -> None:
        from runtime.bench.gateway import gateway_bench_isolated, gateway_measure
        from runtime.bench.gateway_throughput import clients_child
        from runtime.bench.scratch import scratch_require

        clients = [int(c) for c in str(options["clients"]).split(",") if c.strip()]
        try:
            if options["clients_child"]:
                scratch_require()
                clients_child(plan=Path(options["clients_child"]), out=Path(options["child"]))
                return
            if options["child"]:
                scratch_require()
                call_command("migrate", verbosity=0)
                with tempfile.TemporaryDirectory() as root:
                    report = gateway_measure(calls=options["calls"], clients=clients, root=Path(root),
                                             processes=options["processes"])
                Path(options["child"]).write_text(json.dumps(report), encoding="utf-8")
                return
            report = gateway_bench_isolated(calls=options["calls"], clients=clients, processes=options["processes"])
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        d, g = report["direct"], report["gateway"]
        self.stdout.write(f"gateway bench ({report['engine']}, {g['n']} calls each)")
        self.stdout.write(f"  direct adapter write   median {d['median_ms']} ms  p95 {d['p95_ms']} ms")
        self.stdout.write(f"  gateway call           median {g['median_ms']} ms  p95 {g['p95_ms']} ms")
        self.stdout.write(f"  overhead (median)      {report['overhead_median_ms']} ms")
        j, e, r = report["json_api"], report["engine_write"], report["ratio_to_engine_write"]
        self.stdout.write(f"  JSON API call          median {j['median_ms']} ms  p95 {j['p95_ms']} ms")
        self.stdout.write(f"  engine write action    median {e['median_ms']} ms  p95 {e['p95_ms']} ms")
        self.stdout.write(f"  over the engine's write (medians): in-process {r['gateway']}x, "
                          f"JSON API {r['json_api']}x")
        e2, r2 = report["engine_write_two_checkpoints"], report["ratio_to_engine_write_two_checkpoints"]
        self.stdout.write(f"  engine write, two checkpoints (as a call has)  median {e2['median_ms']} ms  "
                          f"p95 {e2['p95_ms']} ms")
        self.stdout.write(f"  over that write (medians): in-process {r2['gateway']}x, JSON API {r2['json_api']}x")
        self.stdout.write("  per call (exact counts on every database touched; medians over "
                          f"{next(iter(report['per_call'].values()))['units']} calls):")
        self.stdout.write("    statements  round trips  durable tx  client fsyncs  what")
        for each in report["per_call"].values():
            self.stdout.write(f"    {_num(each['statements']):>10}  {_num(each['round_trips']):>11}  "
                              f"{_num(each['durable_transactions']):>10}  {_num(each['fsyncs']):>13}  "
                              f"{each['label']}")
        for t in report["throughput"]:
            errors = " errors: " + ",".join(t["errors"]) if t["errors"] else ""
            self.stdout.write(f"  {t['clients']:>3} clients, {t['processes']} process"
                              f"{'es' if t['processes'] > 1 else ''}: {t['calls_per_second']} calls/s "
                              f"({t['calls']} calls in {t['seconds']} s){errors}")
        if options["json_file"]:
            Path(options["json_file"]).write_text(json.dumps(report, indent=2), encoding="utf-8")
