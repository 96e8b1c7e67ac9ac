"""``manage.py combinations``: the deployed version combinations (DESIGN.md section 8.4).

``list`` (id, state, share, scope, runs), ``show ID`` (fields, history, in-flight runs),
``register SPEC [--state canary|active] [--share F] --by NAME --reason TEXT`` (the combination of
this process's code for the task spec), ``promote ID --by --reason [--share F]`` and
``rollback ID --by --reason``. Exit 1 when a service refuses.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.errors import RatchetError
from runtime.models import Combination
from runtime.rollout.combinations import (
    combination_fields_of_spec,
    combination_get,
    combination_in_flight,
    combination_promote,
    combination_queue,
    combination_register,
    combination_rollback,
)


class Command(BaseCommand):
    help = "List, show, register, promote or roll back version combinations."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="every combination with its state and share")
        show = sub.add_parser("show", help="one combination's fields, history and in-flight runs")
        show.add_argument("id")
        register = sub.add_parser("register", help="register this code's combination for a task spec")
        register.add_argument("spec")
        register.add_argument("--tenant", default=None)
        register.add_argument("--state", default="canary", choices=["canary", "active"])
        register.add_argument("--share", type=float, default=0.0)
        for name in ("promote", "rollback"):
            cmd = sub.add_parser(name)
            cmd.add_argument("id")
            if name == "promote":
                cmd.add_argument("--share", type=float, default=1.0, help="below 1: widen the canary only")
        for cmd in (register, *[sub.choices[n] for n in ("promote", "rollback")]):
            cmd.add_argument("--by", required=True, help="who decides")
            cmd.add_argument("--reason", required=True, help="why")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, "_" + options["action"])(options)
        except RatchetError as exc:
            raise CommandError(f"{type(exc).__name__}: {exc}", returncode=1) from None

    def _list(self, options: dict[str, Any]) -> None:
        for c in Combination.objects.order_by("-changed_at"):
            self.stdout.write(f"{c.combination_id[:19]}  {c.state:<11} share {c.share:<4g} {c.fields.get('task')}  "
                              f"runs {c.runs.count()}  queue {combination_queue(c.combination_id)}")

    def _show(self, options: dict[str, Any]) -> None:
        c = combination_get(combination_id=options["id"])
        queue = combination_queue(c.combination_id)
        self.stdout.write(f"{c.combination_id}\nstate {c.state}, share {c.share:g}, queue {queue}")
        self.stdout.write(json.dumps(c.fields, indent=2, sort_keys=True))
        for e in c.history.order_by("id"):
            self.stdout.write(f"{e.at:%Y-%m-%d %H:%M:%S} {e.kind} by {e.actor}: {e.reason}")
        for run in combination_in_flight(combination_id=c.combination_id):
            self.stdout.write(f"in flight: {run.run_id} {run.phase} pending {', '.join(run.pending_keys) or '-'}")

    def _register(self, options: dict[str, Any]) -> None:
        fields = combination_fields_of_spec(spec_path=options["spec"], tenant_id=options["tenant"])
        c = combination_register(fields=fields, state=options["state"], share=options["share"],
                                 actor=options["by"], reason=options["reason"])
        self.stdout.write(f"{c.combination_id} {c.state} share {c.share:g}")

    def _promote(self, options: dict[str, Any]) -> None:
        c = combination_promote(combination_id=options["id"], actor=options["by"], reason=options["reason"],
                                share=options["share"])
        self.stdout.write(f"{c.combination_id} {c.state} share {c.share:g}")

    def _rollback(self, options: dict[str, Any]) -> None:
        runs = combination_rollback(combination_id=options["id"], actor=options["by"], reason=options["reason"])
        self.stdout.write(f"rolled back; {len(runs)} run(s) in flight")
        for run in runs:
            self.stdout.write(f"  {run.run_id} {run.phase} pending {', '.join(run.pending_keys) or '-'}")
