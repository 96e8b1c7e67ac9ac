"""``manage.py approvals``: list, approve, refresh and deny pending approvals headless."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.approvals import approval_deny, approval_grant, approval_refresh, approvals_waiting
from runtime.errors import RatchetError


class Command(BaseCommand):
    help = "Approvals: `list`, `approve RUN_ID`, `refresh RUN_ID`, `deny RUN_ID --reason TEXT`."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list", help="runs waiting for an approval, with what to approve")
        for name in ("approve", "refresh"):
            p = sub.add_parser(name)
            p.add_argument("run_id")
            p.add_argument("--approver", required=True, help="who approves (lands in the evidence)")
            p.add_argument("--fingerprint", required=True,
                           help="the environment fingerprint you reviewed (from `approvals list`)")
            p.add_argument("--ttl", type=float, default=None,
                           help="validity in seconds (at most RATCHET_APPROVAL_MAX_SECONDS)")
        deny = sub.add_parser("deny")
        deny.add_argument("run_id")
        deny.add_argument("--approver", required=True)
        deny.add_argument("--reason", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        try:
            if action == "list":
                for item in approvals_waiting():
                    self.stdout.write(json.dumps(item.as_dict(), sort_keys=True, default=str))
                return
            if action == "deny":
                outcome = approval_deny(run_id=options["run_id"], approver=options["approver"],
                                        reason=options["reason"])
            else:
                call = approval_grant if action == "approve" else approval_refresh
                outcome = call(run_id=options["run_id"], approver=options["approver"],
                               environment_fingerprint=options["fingerprint"], ttl_seconds=options["ttl"])
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{outcome.outcome}: run {outcome.run_id} is now {outcome.phase}"
                          + (f" (approval {outcome.approval_id} until {outcome.expires_at:%Y-%m-%dT%H:%M:%SZ})"
                             if outcome.approval_id and outcome.expires_at else ""))
