"""``manage.py environments``: list registered environments; re-register one whose fence was moved
outside the control plane, signed with the person's own reviewer key (DESIGN.md section 4.16).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.errors import RatchetError
from runtime.keys import reviewer_key_load
from runtime.management.cli_numbers import count
from runtime.models import EnvironmentRegistration
from runtime.ownership.reregistration import environment_reregister, reregistration_sign


class Command(BaseCommand):
    help = ("Environments: `list`; `reregister INSTANCE_ID --key-file F --observed-fence N --reason TEXT` "
            "after looking at an environment whose fence something outside the control plane raised.")

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list")
        rereg = sub.add_parser("reregister")
        rereg.add_argument("instance_id")
        rereg.add_argument("--key-file", required=True,
                           help="your own reviewer key file (from `manage.py keys reviewer-add`); it names you")
        rereg.add_argument("--observed-fence", required=True, type=count(minimum=0),
                           help="the fence you read on the environment (the workspace's .ratchet/fence)")
        rereg.add_argument("--reason", required=True, help="why the environment is sound (kept in the traces)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "list":
            for row in EnvironmentRegistration.objects.order_by("instance_id"):
                self.stdout.write(f"{row.instance_id}  fence {row.fencing_token}  {row.location}")
            return
        try:
            reviewer, keyring = reviewer_key_load(Path(options["key_file"]))
            signed = reregistration_sign(instance_id=options["instance_id"], observed_fence=options["observed_fence"],
                                         reviewer=reviewer, reason=options["reason"], keyring=keyring)
            done = environment_reregister(signed=signed)
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"environment {done.instance_id} re-registered by {done.reviewer}: fencing token "
                          f"{done.token_before} -> {done.token_after}; traced on {len(done.runs_traced)} run(s)")
