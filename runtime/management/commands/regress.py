"""``manage.py regress COMBINATION``: replay the five regression fixtures against a combination
(DESIGN.md section 8.5), print a table, record the result (a promotion needs a passing one) and
exit 1 on any mismatch."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.errors import RatchetError
from runtime.regression.replay import GROUPS, regress_run


class Command(BaseCommand):
    help = "Replay the regression fixtures against a combination; exit 1 on a mismatch."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("combination", help="combination id or unique prefix")
        parser.add_argument("--group", action="append", choices=GROUPS, help="only these groups")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            results = regress_run(combination_id=options["combination"],
                                  groups=tuple(options["group"] or GROUPS))
        except RatchetError as exc:
            raise CommandError(f"{type(exc).__name__}: {exc}", returncode=2) from None
        self.stdout.write(f"{'group':<20} {'result':<8} mismatches")
        for r in results:
            self.stdout.write(f"{r.name:<20} {'pass' if r.passed else 'FAIL':<8} {', '.join(r.mismatches) or '-'}")
        if not all(r.passed for r in results):
            raise CommandError("regression fixtures do not match", returncode=1)
