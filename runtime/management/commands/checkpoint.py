"""``manage.py checkpoint show|verify RUN_ID``: look at and verify stored checkpoints.

* ``checkpoint show RUN_ID [--generation N]`` prints the stored envelope JSON of the committed
  generation (or every row of generation N, orphans included) with its verification status.
* ``checkpoint verify RUN_ID`` exits 0 with ``valid: run RUN_ID generation G`` when the committed
  checkpoint verifies (MAC, schema, invariants, HWM generation and digest, identity, the scenario
  fingerprint recorded on the run, and every approval and reviewer decision signature inside
  under the public keys of those roots) and the main database's unsigned rows agree with it (the
  trace chain, review case rows, a row-only freeze), else exits non-zero with the typed error's message or
  the list of evidence findings (DESIGN.md section 4.8).

Output never contains key material: envelopes carry only key ids and MACs (DESIGN.md section 4).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.checkpoints.approval_checks import evidence_findings
from runtime.checkpoints.protocol import checkpoint_hwm, checkpoint_verify
from runtime.checkpoints.reports import CheckpointReport, checkpoint_inspect
from runtime.checkpoints.row_agreement import run_row_findings
from runtime.errors import RatchetError
from runtime.management.cli_numbers import count


class Command(BaseCommand):
    help = "Show or verify a run's stored checkpoints."
    # A forensic tool must still run when an unrelated part of the project fails its system
    # checks; the keyring problems runtime.E001 would report surface here as typed errors anyway.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        show = sub.add_parser("show", help="print a stored checkpoint envelope and its status")
        show.add_argument("run_id")
        show.add_argument(
            "--generation", type=count(minimum=1), default=None, help="show this generation's rows"
        )
        verify = sub.add_parser("verify", help="verify the committed checkpoint (exit 0 if valid)")
        verify.add_argument("run_id")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["action"] == "show":
                self._show(options["run_id"], options["generation"])
            else:
                restored = checkpoint_verify(run_id=options["run_id"])
                findings = evidence_findings(restored.state) + run_row_findings(
                    run_id=options["run_id"], state=restored.state)
                if findings:
                    lines = "\n".join(f"  - {finding}" for finding in findings)
                    raise CommandError(f"checkpoint evidence does NOT verify (run {options['run_id']} "
                                       f"generation {restored.generation}):\n{lines}")
                self.stdout.write(
                    f"valid: run {options['run_id']} generation {restored.generation}"
                )
        except RatchetError as exc:
            raise CommandError(str(exc)) from None

    def _show(self, run_id: str, generation: int | None) -> None:
        if generation is None:
            hwm = checkpoint_hwm(run_id=run_id)  # HighWaterMarkMissingError -> CommandError
            reports = [
                r
                for r in checkpoint_inspect(run_id=run_id, generation=hwm.generation)
                if r.committed
            ]
            if not reports:
                raise CommandError(
                    f"no stored checkpoint matches the high-water mark (run_id={run_id}, "
                    f"generation={hwm.generation}); use --generation N to inspect stored rows"
                )
        else:
            reports = checkpoint_inspect(run_id=run_id, generation=generation)
            if not reports:
                raise CommandError(
                    f"no stored checkpoint (run_id={run_id}, generation={generation})"
                )
        for report in reports:
            self._print(report)

    def _print(self, report: CheckpointReport) -> None:
        self.stdout.write(
            f"# generation {report.generation} digest {report.digest} key id {report.key_id} "
            f"schema v{report.schema_version} lease version {report.lease_version} "
            f"{'committed' if report.committed else 'not committed'}"
        )
        self.stdout.write(f"# status: {report.status}")
        if report.envelope is None:
            self.stdout.write("# the stored bytes are not a JSON object")
        else:
            self.stdout.write(json.dumps(report.envelope, indent=2, sort_keys=True))
