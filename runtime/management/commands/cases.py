"""``manage.py cases``: list review cases, show what to sign, sign and apply decisions headless.

A decision is signed with the reviewer's own key file (``--key-file``, made by ``manage.py keys
reviewer-add``); the reviewer's name comes from that file, never from a free-text option
(DESIGN.md section 6.3).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.core.checkpoint import SignedDecision
from runtime.decisions.case_sides import case_sides
from runtime.decisions.reviews import (
    case_decide,
    decision_binding_recorded,
    decision_prepare,
    decision_refused_error,
    decision_sign_for,
)
from runtime.errors import PluginError, RatchetError, ReviewCaseNotFoundError, TaskSpecError
from runtime.keys import reviewer_key_load
from runtime.models import ReviewCase


class Command(BaseCommand):
    help = ("Review cases: `list`, `show CASE_ID`, `sign CASE_ID --key-file F --decision replan|abort "
            "[--out FILE]`, `apply FILE`, `decide CASE_ID --key-file F --decision D` (sign + apply).")

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        lst = sub.add_parser("list")
        lst.add_argument("--status", default=None)
        show = sub.add_parser("show", help="the reason, both sides of what conflicted, their diff and the binding")
        show.add_argument("case_id")
        show.add_argument("--json", action="store_true", help="one JSON object: case, sides (with diff_text), binding")
        for name in ("sign", "decide"):
            p = sub.add_parser(name)
            p.add_argument("case_id")
            p.add_argument("--key-file", required=True,
                           help="your own reviewer key file (from `manage.py keys reviewer-add`)")
            p.add_argument("--decision", required=True, choices=["replan", "abort"])
            if name == "sign":
                p.add_argument("--out", default="-", help="file for the signed decision (default stdout)")
        apply = sub.add_parser("apply")
        apply.add_argument("file", help="a signed decision JSON file (from `cases sign`)")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        try:
            if action == "list":
                rows = ReviewCase.objects.order_by("-opened_at")
                if options["status"]:
                    rows = rows.filter(status=options["status"])
                for row in rows:
                    self.stdout.write(f"{row.case_id}  {row.status:10}  {row.reason:20}  run {row.run_id}  "
                                      f"{row.opened_at:%Y-%m-%d %H:%M:%S}")
                return
            if action == "show":
                self._show(options["case_id"], as_json=options["json"])
                return
            if action in ("sign", "decide"):
                reviewer, keyring = reviewer_key_load(Path(options["key_file"]))
                signed = decision_sign_for(case_id=options["case_id"], reviewer=reviewer,
                                           decision=options["decision"], keyring=keyring)
                if action == "sign":
                    text = signed.model_dump_json(indent=2)
                    if options["out"] == "-":
                        self.stdout.write(text)
                    else:
                        Path(options["out"]).write_text(text)
                    return
            else:
                signed = SignedDecision.model_validate_json(Path(options["file"]).read_bytes(), strict=False)
            outcome = case_decide(decision=signed)
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        except BrokenPipeError:
            raise  # the reader went away: manage.py ends quietly, this is no unreadable decision
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot read the decision: {exc}") from None
        if not outcome.applied:
            raise CommandError(str(decision_refused_error(outcome)))
        self.stdout.write(f"{outcome.decision} applied to {outcome.case_id}: run {outcome.run_id} is now "
                          f"{outcome.phase}" + (" (already applied)" if outcome.already_applied else ""))

    def _show(self, case_id: str, *, as_json: bool) -> None:
        """Print the case's reason, both sides, their diff and the binding (DESIGN.md section 6.11)."""
        row = ReviewCase.objects.filter(case_id=case_id).first()
        if row is None:
            raise ReviewCaseNotFoundError(case_id=case_id)
        sides = case_sides(case=row)
        note = ""
        try:
            binding = decision_prepare(case_id=case_id)
        except (PluginError, TaskSpecError) as exc:
            note = (f"this process cannot load the run's plug-in ({type(exc).__name__}); the binding is the one "
                    "the verified checkpoint records; deciding needs the plug-in installed")
            try:
                binding = decision_binding_recorded(case_id=case_id)
            except RatchetError as unbound:
                binding, note = None, f"no decision can be bound to this case: {unbound}"
        except RatchetError as exc:
            # A case whose checkpoint does not verify, or which only the rows hold (a corrupt
            # ledger, a refused restore, changed code), stays readable; why no decision can be
            # bound is shown where the binding would be.
            binding, note = None, f"no decision can be bound to this case: {exc}"
        if as_json:
            self.stdout.write(json.dumps({
                "case": {"case_id": row.case_id, "run_id": row.run_id, "status": row.status, "reason": row.reason,
                         "detail": row.detail, "opened_at": row.opened_at},
                "sides": sides.as_dict(), "binding": binding, "binding_note": note,
            }, indent=2, sort_keys=True, default=str))
            return
        out = [f"case {row.case_id}  ({row.status})  run {row.run_id}", f"reason: {row.reason}: {sides.headline}"]
        if row.detail:
            out.append(f"detail: {row.detail}")
        for mark, side in (("<", sides.left), (">", sides.right)):
            out.append(f"\n{mark} {side.title}")
            out += [f"    {label}: {value}" for label, value in side.facts]
            if side.text:
                out += ["    " + line for line in side.text.splitlines()]
        if sides.diff:
            out.append(f"\ndiff ({sides.right.title} -> {sides.left.title}):")
            out += sides.diff
            if sides.diff_omitted:
                out.append(f"... {sides.diff_omitted} more lines")
        elif sides.comparable:
            out.append("\nboth sides are identical as text")
        out += [f"note: {n}" for n in sides.notes]
        out.append("\nbinding" + (f" ({note})" if note else "") + ":")
        out.append(json.dumps(binding, indent=2, sort_keys=True, default=str))
        self.stdout.write("\n".join(out))
