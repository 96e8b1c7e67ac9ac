"""``manage.py gateway_tokens``: issue, list and revoke the agent gateway's tokens (DESIGN.md section 5.12)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.errors import RatchetError
from runtime.gateway.tokens import token_issue, token_issue_agent, token_revoke, tokens_for_run


class Command(BaseCommand):
    help = ("Gateway tokens: `issue RUN_ID [--agent NAME] [--action KIND ...]` prints a token once; "
            "`issue-agent TENANT --agent NAME (--run RUN_ID ... | --task TASK_ID)` a per-agent token for "
            "several runs of one tenant; `list RUN_ID`; `revoke TOKEN_ID` (refused by the next call).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("verb", choices=["issue", "issue-agent", "list", "revoke"])
        parser.add_argument("ident", help="the run id (issue, list), the tenant (issue-agent) or the token id (revoke)")
        parser.add_argument("--run", action="append", default=[], help="issue-agent: a run of the tenant (repeatable)")
        parser.add_argument("--task", default="", help="issue-agent: every run of this task in the tenant")
        parser.add_argument("--agent", default="")
        parser.add_argument("--action", action="append", default=[], help="limit the token to this action kind")

    def handle(self, *args: Any, **options: Any) -> None:
        verb, ident = options["verb"], options["ident"]
        try:
            if verb == "issue":
                issued = token_issue(run_id=ident, agent=options["agent"], actions=options["action"])
                self.stderr.write(f"token {issued.token_id} for run {issued.run_id} (shown once; store it now)")
                self.stdout.write(issued.token)
            elif verb == "issue-agent":
                issued = token_issue_agent(tenant_id=ident, agent=options["agent"], run_ids=options["run"],
                                           task_id=options["task"], actions=options["action"])
                self.stderr.write(f"agent token {issued.token_id} for tenant {ident} (shown once; store it now)")
                self.stdout.write(issued.token)
            elif verb == "revoke":
                if not token_revoke(token_id=ident):
                    raise CommandError(f"no live token {ident}")
                self.stdout.write(f"revoked {ident}")
            else:
                for row in tokens_for_run(run_id=ident):
                    state = "revoked" if row.revoked_at else "live"
                    actions = ",".join(row.actions) or "*"
                    self.stdout.write(f"{row.token_id}  {state:8}  {row.agent or '-':20}  {actions}")
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
