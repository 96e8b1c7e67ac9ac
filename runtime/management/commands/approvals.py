"""``manage.py approvals``: list, approve, refresh and deny pending approvals headless.

Approving, refreshing or denying first asks the run's adapter whether the pending write already
happened, so this shell needs what the adapter reads (an HTTP service's bearer token in the
variable the spec names). When the adapter cannot be read from here nothing is decided and the
run keeps waiting: the error says so and names what is missing (DESIGN.md section 6.2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.core.denial_evidence import DenyMode
from runtime.decisions.approvals import (
    approval_grant,
    approval_refresh,
    approvals_waiting,
    approvals_waiting_json,
)
from runtime.decisions.batch import BatchItem, approvals_batch_decide
from runtime.decisions.denials import approval_deny
from runtime.demo.services import STATE_FILE, TOKEN_ENV
from runtime.errors import AdapterError, HttpCredentialExpiredError, LeaseHeldError, RatchetError
from runtime.management.approvals_amend import amend_handle, amend_parser_add
from runtime.management.cli_numbers import seconds


class Command(BaseCommand):
    help = ("Approvals: `list`, `approve RUN_ID`, `refresh RUN_ID`, `deny RUN_ID --reason TEXT [--continue]`, "
            "`amend RUN_ID --set KEY=VALUE`, `batch approve|deny --item RUN INTENT FINGERPRINT ...` "
            "(or `--from FILE` of `list` lines).")

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        lst = sub.add_parser("list", help="runs waiting for an approval, with what to approve")
        lst.add_argument("--json", action="store_true",
                         help="one JSON array: each waiting write with its dry-run diff text, who asked and which rule")
        for name in ("approve", "refresh"):
            p = sub.add_parser(name)
            p.add_argument("run_id")
            p.add_argument("--approver", required=True, help="who approves (lands in the evidence)")
            p.add_argument("--fingerprint", required=True,
                           help="the environment fingerprint you reviewed (from `approvals list`)")
            p.add_argument("--ttl", type=seconds(allow_zero=False, name="approval validity"), default=None,
                           help="validity in seconds (at most RATCHET_APPROVAL_MAX_SECONDS)")
            if name == "approve":
                p.add_argument("--comment", default=None, help="an optional comment, signed into the approval")
        deny = sub.add_parser("deny")
        deny.add_argument("run_id")
        deny.add_argument("--approver", required=True)
        deny.add_argument("--reason", required=True)
        deny.add_argument("--continue", dest="keep_going", action="store_true",
                          help="let the agent try something else: the reason is the denied write's outcome and "
                               "the run goes on (default: the run stops, failed)")
        batch = sub.add_parser("batch", help="approve or deny several waiting approvals, each on its own")
        batch.add_argument("decision", choices=["approve", "deny"])
        batch.add_argument("--approver", required=True)
        batch.add_argument("--item", nargs=3, action="append", default=[],
                           metavar=("RUN_ID", "INTENT_DIGEST", "FINGERPRINT"),
                           help="one approval as you reviewed it (repeatable)")
        batch.add_argument("--from", dest="from_file", default=None,
                           help="a file of `approvals list` lines (`-`: standard input), each one item")
        batch.add_argument("--reason", default="", help="deny: why (required)")
        batch.add_argument("--continue", dest="keep_going", action="store_true",
                           help="deny: let each agent try something else instead of stopping its run")
        batch.add_argument("--comment", default=None, help="approve: an optional comment signed into each approval")
        amend_parser_add(sub)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        try:
            if action == "list" and options["json"]:
                self.stdout.write(json.dumps(approvals_waiting_json(), indent=2, sort_keys=True, default=str))
                return
            if action == "list":
                for item in approvals_waiting():
                    self.stdout.write(json.dumps(item.as_dict(), sort_keys=True, default=str))
                return
            if action == "amend":
                self.stdout.write(amend_handle(options, self.stdout))
                return
            if action == "batch":
                self._batch(options)
                return
            if action == "deny":
                outcome = approval_deny(run_id=options["run_id"], approver=options["approver"],
                                        reason=options["reason"],
                                        mode=DenyMode.CONTINUE if options["keep_going"] else DenyMode.STOP)
            elif action == "approve":
                outcome = approval_grant(run_id=options["run_id"], approver=options["approver"],
                                         environment_fingerprint=options["fingerprint"], ttl_seconds=options["ttl"],
                                         comment=options["comment"])
            else:
                outcome = approval_refresh(run_id=options["run_id"], approver=options["approver"],
                                           environment_fingerprint=options["fingerprint"], ttl_seconds=options["ttl"])
        except AdapterError as exc:
            raise CommandError(adapter_blocked(run_id=options["run_id"], action=action, error=exc)) from None
        except LeaseHeldError as exc:  # the dashboard's wording, so a person reads one story
            raise CommandError(exc.busy_text(unchanged=f"nothing was {_done(action)}",
                                             then="Run the command again in a few seconds.")) from None
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{outcome.outcome}: run {outcome.run_id} is now {outcome.phase}"
                          + (f" (approval {outcome.approval_id} until {outcome.expires_at:%Y-%m-%dT%H:%M:%SZ})"
                             if outcome.approval_id and outcome.expires_at else ""))


    def _batch(self, options: dict[str, Any]) -> None:
        """One JSON line per item (``ok``, ``outcome``, ``phase`` or the refusal); fails when any
        item was refused, after every item was tried (DESIGN.md section 6.15)."""
        items = [BatchItem(*triple) for triple in options["item"]]
        if options["from_file"]:
            items += batch_items_read(options["from_file"])
        # The shell holds every permission, as for `approve` (whose grant may refresh): an item
        # with expired evidence is refreshed here as the dashboard's batch does for a user allowed to.
        results = approvals_batch_decide(items=items, approver=options["approver"], decision=options["decision"],
                                         reason=options["reason"], comment=options["comment"], may_refresh=True,
                                         mode=DenyMode.CONTINUE if options["keep_going"] else DenyMode.STOP)
        for result in results:
            self.stdout.write(json.dumps(result.as_dict(), sort_keys=True))
        refused = [r for r in results if not r.ok]
        if refused:
            raise CommandError(f"{len(refused)} of {len(results)} item(s) refused (nothing changed for them): "
                               + ", ".join(r.run_id for r in refused))


def batch_items_read(path: str) -> list[BatchItem]:
    """The items of ``approvals list`` lines in ``path`` (``-``: standard input).

    Raises:
        CommandError: a line that is not such an object (nothing is decided).
    """
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    items = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            items.append(BatchItem(run_id=str(row["run_id"]), intent_digest=str(row["intent_digest"]),
                                   environment_fingerprint=str(row["environment_fingerprint"])))
        except (ValueError, KeyError, TypeError):
            raise CommandError(f"{path} line {number} is not an `approvals list` line; nothing was decided") from None
    return items


def _done(action: str) -> str:
    return {"approve": "approved", "refresh": "refreshed", "deny": "denied", "amend": "amended"}.get(action, "decided")


def adapter_blocked(*, run_id: str, action: str, error: AdapterError) -> str:
    """The message when the run's adapter could not be read from this process: the run still waits.

    The adapter error's own hint speaks of a run the engine froze, which this run is not; so the
    message is built from its text and context (never a credential's value) and says what to set.
    """
    head = (f"nothing was {_done(action)}: run {run_id} is still awaiting approval and nothing was written. The run's "
            f"adapter could not check the pending write from this shell ({type(error).__name__}: {error.message}).")
    variable = error.context.get("variable")
    if isinstance(error, HttpCredentialExpiredError) and variable:
        demo = f" (for `manage.py demo` runs: the \"token\" entry of {settings.VAR_DIR}/demo/{STATE_FILE})" \
            if variable == TOKEN_ENV else ""
        return (f"{head} This shell has no {variable}: set it to the service's bearer token{demo} and run the "
                "command again, or decide on the dashboard, whose server process has it.")
    if isinstance(error, HttpCredentialExpiredError):
        return (f"{head} The service refused the credential this shell holds: set the current one in the "
                "variable the task spec names (environment.options.credential_env) and run the command again.")
    if error.retryable:
        return f"{head} The service may be down or busy: run the command again once it answers."
    return f"{head} Fix the cause named above and run the command again."
