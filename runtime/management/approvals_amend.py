"""``manage.py approvals amend``: amend a waiting write's arguments and approve it headless (DESIGN.md section 6.13).

The arguments start as proposed (``approvals amend RUN --show`` prints them with the dry-run diff)
and are changed by ``--set key=value`` (dotted keys reach into ``params``) or replaced by a JSON
file (``--json FILE``, ``-`` for standard input). ``--dry-run`` prints the amended action, its
intent digest and diff without changing anything; otherwise the amendment is signed, the original
sealed as superseded and the amended action approved in one commit.
"""

from __future__ import annotations

import json
import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import Any, TextIO

from runtime.decisions.amend_arguments import arguments_assign, arguments_parse
from runtime.decisions.amendments import amendment_preview, approval_amend, proposed_arguments
from runtime.errors import AmendmentPolicyError
from runtime.management.cli_numbers import seconds


def amend_parser_add(sub: Any) -> ArgumentParser:
    """Add the ``amend`` subcommand to ``approvals``' subparsers and return its parser."""
    p: ArgumentParser = sub.add_parser("amend", help="change a waiting write's arguments within the policy, "
                                                     "then approve the amended action")
    p.add_argument("run_id")
    p.add_argument("--approver", help="who amends and approves (lands in the signed record); --approver, "
                                      "--fingerprint and --intent are needed to amend, not with --show or --dry-run")
    p.add_argument("--fingerprint", help="the environment fingerprint you reviewed (from `approvals list` or --show)")
    p.add_argument("--intent", help="the proposed intent digest you reviewed (from `approvals list` or --show); "
                                    "the amendment is refused if the waiting write is another one by now")
    p.add_argument("--set", dest="assign", action="append", default=[], metavar="KEY=VALUE",
                   help="change one argument (repeatable; params.NAME for a parameter)")
    p.add_argument("--json", dest="json_file", help="a JSON object with all the arguments (- for stdin)")
    p.add_argument("--note", default="", help="why you amend it (the agent is told)")
    p.add_argument("--ttl", type=seconds(allow_zero=False, name="approval validity"), default=None,
                   help="approval validity in seconds (at most RATCHET_APPROVAL_MAX_SECONDS)")
    p.add_argument("--show", action="store_true", help="print the proposed arguments and stop")
    p.add_argument("--dry-run", action="store_true", help="print the amended action and its diff, change nothing")
    return p


def amend_handle(options: dict[str, Any], out: TextIO) -> str:
    """Run ``approvals amend`` with parsed ``options``, printing to ``out``; return the last line.

    Raises:
        AmendmentPolicyError / AmendmentRefusedError and the other errors of
        :func:`~runtime.decisions.amendments.approval_amend`; the command turns them into its error.
    """
    run_id = options["run_id"]
    _, arguments = proposed_arguments(run_id=run_id)
    if options.get("json_file"):
        raw = sys.stdin.read() if options["json_file"] == "-" else Path(options["json_file"]).read_text("utf-8")
        arguments = arguments_parse(raw)
    arguments = arguments_assign(arguments, options.get("assign") or [])
    if options.get("show") or options.get("dry_run"):
        preview = amendment_preview(run_id=run_id, arguments=arguments)
        shown = {"run_id": run_id, "idempotency_key": preview.idempotency_key,
                 "proposed_intent_digest": preview.proposed_intent_digest, "arguments": preview.arguments,
                 "amended_intent_digest": preview.amended_intent_digest, "changed": preview.changed,
                 "environment_fingerprint": preview.environment_fingerprint}
        out.write(json.dumps(shown, sort_keys=True) + "\n")
        out.write(preview.dry_run_diff if preview.dry_run_diff.endswith("\n") or not preview.dry_run_diff
                  else preview.dry_run_diff + "\n")
        return "previewed"
    missing = [flag for flag in ("approver", "fingerprint", "intent") if not options.get(flag)]
    if missing:
        # The intent is the one the person reviewed, never read back here: an amendment must not
        # bind itself to a write that replaced the one they looked at (DESIGN.md section 6.13).
        raise AmendmentPolicyError(", ".join(f"--{flag}" for flag in missing) + " missing: amending needs "
                                   "--approver, --fingerprint and --intent (or use --show / --dry-run)")
    outcome = approval_amend(run_id=run_id, approver=options["approver"], arguments=arguments,
                             proposed_intent_digest=options["intent"],
                             environment_fingerprint=options["fingerprint"], note=options.get("note") or "",
                             ttl_seconds=options.get("ttl"))
    if outcome.outcome == "reconciled":
        return f"reconciled: run {run_id} had already written the original before a crash; nothing was amended"
    return (f"amended: run {run_id} is now {outcome.phase} (intent {outcome.amended_intent_digest} replaces "
            f"{outcome.proposed_intent_digest}; approval {outcome.approval_id} until "
            f"{outcome.expires_at:%Y-%m-%dT%H:%M:%SZ})")
