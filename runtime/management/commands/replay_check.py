"""``manage.py replay_check REPO [RANGE]``: replay a repository's first-parent history under seeded
external SIGKILLs and check that every commit landed exactly once (``runtime.replay_check``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.errors import RatchetError
from runtime.management.cli_numbers import count, fraction, seconds
from runtime.replay_check.acceptance import COST_COMMITS, replay_check_run
from runtime.replay_check.chaos import ChildRecord
from runtime.replay_check.repository import WHOLE_HISTORY

VIOLATION_EXIT_CODE = 3
"""Exit code when the replay ran but an acceptance check failed (1 is a command error, 2 usage)."""


class Command(BaseCommand):
    help = (
        "Replay REPO's first-parent history (RANGE: 'whole' (default), 'last:N' or 'A..B') into a fresh "
        "clone, running the run in child processes that are SIGKILLed (whole process group, git included) "
        "at moments a seeded RNG picks and resumed after each kill; then check the tip tree, one commit per "
        "source commit, one commit per idempotency key, no commit without a key, run completed and not "
        "frozen. Reports the cost of a write (the first --cost-commits commits replayed again uninterrupted, "
        "against a plain git loop over them) apart from the wall time under kills. Prints a table (or --json). "
        "Uses the configured database. Exit codes: 0 every check "
        f"passed; 1 error (bad repository or range); 2 usage; {VIOLATION_EXIT_CODE} a check failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("repo", help="path of the source git repository (read only)")
        parser.add_argument("range", nargs="?", default=WHOLE_HISTORY,
                            help="'whole' (every first-parent commit after the root), 'last:N' or 'A..B'")
        parser.add_argument("--kills", type=count(minimum=0), default=10,
                            help="external SIGKILLs to deliver (default 10)")
        parser.add_argument("--seed", type=count(minimum=0), default=1,
                            help="seed of the kill RNG, 0 or more (default 1)")
        parser.add_argument("--lease-seconds", type=seconds(allow_zero=False), default=5.0,
                            help="lease time to live of the children, so a takeover after a kill waits seconds, "
                                 "not the default 30 (default 5)")
        parser.add_argument("--git-share", type=fraction, default=0.5,
                            help="share of kills that wait for a git process in the child's group (default 0.5)")
        parser.add_argument("--workdir", default=None,
                            help="directory for the task, target clone and logs (default var/replay-check/<time>)")
        parser.add_argument("--child-timeout", type=seconds(allow_zero=False), default=3600.0,
                            help="seconds after which a hung child is killed (default 3600)")
        parser.add_argument("--cost-commits", type=count(minimum=0), default=COST_COMMITS,
                            help="commits (the first of the range) replayed again uninterrupted, and by a plain "
                                 f"git loop, for the cost of a write; 0: the whole range (default {COST_COMMITS})")
        parser.add_argument("--no-baseline", action="store_true",
                            help="skip the cost measurement (the uninterrupted sample and the plain git loop)")
        parser.add_argument("--json", action="store_true", help="print the report as one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        workdir = Path(options["workdir"] or Path(settings.VAR_DIR) / "replay-check" /
                       f"{time.strftime('%Y%m%d-%H%M%S')}-seed{options['seed']}").resolve()
        as_json = options["json"]

        def on_child(child: ChildRecord) -> None:
            if not as_json:
                what = f"exit {child.returncode}"
                if child.killed:
                    what = "killed inside git" if child.git_at_kill else "killed"
                self.stderr.write(f"child {child.index} {child.command}: {what} after {child.seconds:.1f} s, "
                                  f"+{child.generations} generations", style_func=lambda text: text)

        try:
            report = replay_check_run(
                source=Path(options["repo"]), range_=options["range"], kills=options["kills"], seed=options["seed"],
                workdir=workdir, lease_seconds=options["lease_seconds"], git_share=options["git_share"],
                baseline=not options["no_baseline"], cost_commits=options["cost_commits"],
                child_timeout=options["child_timeout"], on_child=on_child,
            )
        except (RatchetError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(report.as_json(), sort_keys=True) if as_json else report.table())
        if not report.passed:
            failed = [check.name for check in report.checks if not check.passed]
            raise CommandError(f"replay check failed: {'; '.join(failed)}", returncode=VIOLATION_EXIT_CODE)
