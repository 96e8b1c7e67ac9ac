"""``manage.py operator_credentials``: issue and revoke the JSON API's operator credentials (DESIGN.md section 5.13)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.errors import RatchetError
from runtime.gateway.operator_credentials import credential_issue, credential_revoke


class Command(BaseCommand):
    help = ("Operator credentials for /api/v1/operator/ (start and cancel runs, issue and revoke gateway "
            "tokens, in one tenant): `issue TENANT [--name NAME]` prints a credential once; "
            "`revoke CREDENTIAL_ID` (refused by the next request).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("verb", choices=["issue", "revoke"])
        parser.add_argument("ident", help="the tenant to issue for, or the credential id to revoke")
        parser.add_argument("--name", default="", help="issue: who or what holds it (shown in lists and traces)")

    def handle(self, *args: Any, **options: Any) -> None:
        verb, ident = options["verb"], options["ident"]
        try:
            if verb == "issue":
                issued = credential_issue(tenant_id=ident, name=options["name"])
                self.stderr.write(f"operator credential {issued.credential_id} for tenant {ident} "
                                  "(shown once; store it now)")
                self.stdout.write(issued.credential)
            elif not credential_revoke(credential_id=ident):
                raise CommandError(f"no live operator credential {ident}")
            else:
                self.stdout.write(f"revoked {ident}")
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
