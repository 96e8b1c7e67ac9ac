"""``manage.py export_bundle RUN_ID [--out FILE]``: write a run's signed evidence bundle (JSON).

The bundle (``runtime.bundles.export``) holds the committed checkpoint envelope and every stored one, the
high-water mark, the whole hash-chained trace, the receipts and the review cases with their signed
decisions, signed under the checkpoint trust root. ``manage.py verify_bundle FILE`` checks it
offline. A run whose committed checkpoint or trace chain does not verify gets no bundle (the
command exits non-zero with the reason).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.bundles.export import bundle_export
from runtime.errors import RatchetError
from runtime.management.document_output import document_write


class Command(BaseCommand):
    help = "Export a run's signed evidence bundle as JSON (stdout, or --out FILE)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id")
        parser.add_argument("--out", default="-", help="file to write (default: stdout)")
        parser.add_argument("--by", default="", help="who exports it (recorded in the bundle)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            bundle = bundle_export(run_id=options["run_id"], exported_by=options["by"])
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        text = json.dumps(bundle, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        document_write(self, text=text, out=options["out"], what=f"the evidence bundle of run {options['run_id']}")
