"""``manage.py admission``: show the admission gate, or re-open a scope (DESIGN.md section 8.3).

``admission status [TENANT [TASK]]`` prints the window metrics and state of one scope, of every
known scope of a tenant, or of every known scope (``runtime.rollout.admission.admission_scopes``);
``admission reopen TENANT TASK --by NAME --reason TEXT`` records a decision signed with the
reviewer trust root. Exit 1 from ``status`` when a scope shown is closed and from ``reopen`` when
it cannot sign; exit 2 for a scope nothing names (``AdmissionScopeUnknownError``, a misspelling).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.errors import AdmissionScopeUnknownError, RatchetError
from runtime.rollout.admission import admission_reopen, admission_scopes, admission_state


class Command(BaseCommand):
    help = "Show the admission gate per tenant and task, or re-open a scope with a signed decision."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        status = sub.add_parser("status", help="window metrics of a scope, of a tenant's scopes, or of every scope")
        status.add_argument("tenant", nargs="?")
        status.add_argument("task", nargs="?")
        status.add_argument("--json", action="store_true")
        reopen = sub.add_parser("reopen", help="re-open a scope with a signed decision")
        reopen.add_argument("tenant")
        reopen.add_argument("task")
        reopen.add_argument("--by", required=True, help="the admin's name")
        reopen.add_argument("--reason", required=True, help="why admission may resume")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "reopen":
            try:
                decision = admission_reopen(tenant_id=options["tenant"], task_id=options["task"],
                                            decided_by=options["by"], reason=options["reason"])
            except AdmissionScopeUnknownError as exc:
                raise CommandError(f"{type(exc).__name__}: {exc}", returncode=2) from None
            except (RatchetError, ValueError) as exc:
                raise CommandError(str(exc), returncode=1) from None
            self.stdout.write(f"admission re-opened for {decision.tenant_id}/{decision.task_id} by "
                              f"{decision.decided_by} (decision {decision.pk}, key {decision.key_id})")
            return
        if options["tenant"] and options["task"]:
            states = [admission_state(tenant_id=options["tenant"], task_id=options["task"])]
        else:
            states = [admission_state(tenant_id=t, task_id=k) for t, k in admission_scopes(tenant_id=options["tenant"])]
        if not states and not options["json"]:
            self.stdout.write("no scope has runs, metric counters, threshold overrides or decisions yet")
        if options["json"]:
            self.stdout.write(json.dumps([s.as_dict() for s in states], default=str, sort_keys=True))
        for state in states if not options["json"] else []:
            verdict = "open" if state.open else f"CLOSED: {state.metric} {state.value} (threshold {state.threshold})"
            self.stdout.write(f"{state.tenant_id}/{state.task_id}: {verdict}; recoveries {state.recoveries}, "
                              f"success rate {state.success_rate}, p95 {state.p95_seconds} s, "
                              f"duplicates {state.duplicates}")
        if any(not s.open for s in states):
            raise CommandError("admission is closed", returncode=1)
