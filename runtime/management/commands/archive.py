"""``manage.py archive --older-than DURATION [--phase P ...] [--tenant T ...] [--apply]``:
archive finished runs (DESIGN.md section 4.11); ``--verify RUN_ID``: check an archived bundle.

Dry by default: prints what would go (runs and the rows they hold). With ``--apply`` each run's
signed evidence bundle is written to the archive storage (``RATCHET_ARCHIVE_STORAGE``) and its
bulky rows are removed, one run per transaction (``runtime.archive.runs``); a pass killed midway
leaves every run archived or intact, and running it again finishes the job. ``--verify RUN_ID``
fetches an archived run's bundle, checks its digest and verifies it with public keys only
(``--public-keys FILE``, or the configured keys' public halves).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.archive.runs import archive_pass
from runtime.archive.selection import FINISHED_PHASES, ArchiveSelection
from runtime.archive.verify import archived_bundle_findings
from runtime.errors import RatchetError
from runtime.management.cli_numbers import count

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration(text: str) -> float:
    """``90s``, ``15m``, ``12h``, ``30d``, ``2w`` or plain seconds, as seconds (> 0).

    Raises:
        ValueError: anything else (argparse reports it as a usage error).
    """
    raw = text.strip().lower()
    unit = _UNITS.get(raw[-1:]) if raw else None
    number = raw[:-1] if unit is not None else raw
    try:
        value = float(number) * (unit or 1)
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 15m, 12h, 30d)") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"the duration must be positive: {text!r}")
    return value


class Command(BaseCommand):
    help = ("Archive finished runs older than a duration (dry run unless --apply): their signed bundle "
            "goes to the archive storage and their bulky rows are removed.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than", type=duration, default=None, metavar="DURATION",
                            help="runs not updated for this long (e.g. 30d, 12h, 90s)")
        parser.add_argument("--phase", action="append", choices=FINISHED_PHASES, default=None,
                            help="only this finished phase (repeatable; default: all finished phases)")
        parser.add_argument("--tenant", action="append", default=None, help="only this tenant (repeatable)")
        parser.add_argument("--limit", type=count(minimum=1), default=None, metavar="N",
                            help="at most N runs in this pass")
        parser.add_argument("--apply", action="store_true", help="archive; without it nothing is changed")
        parser.add_argument("--verify", default=None, metavar="RUN_ID",
                            help="verify the archived bundle of RUN_ID with public keys only, then exit")
        parser.add_argument("--public-keys", default=None, metavar="FILE",
                            help="with --verify: a public-key file (`manage.py keys export-public`)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["verify"]:
            self._verify(options["verify"], options["public_keys"])
            return
        if options["older_than"] is None:
            raise CommandError("--older-than DURATION is required (or --verify RUN_ID)")
        selection = ArchiveSelection(older_than=options["older_than"],
                                     phases=tuple(options["phase"] or FINISHED_PHASES),
                                     tenants=tuple(options["tenant"] or ()), limit=options["limit"])
        try:
            outcome = archive_pass(selection=selection, apply=options["apply"],
                                   progress=self.stdout.write if options["verbosity"] > 1 else None)
        except (ValueError, RatchetError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(outcome.summary())
        if outcome.dry_run:
            for run_id in outcome.candidates:
                self.stdout.write(f"  {run_id}")
            self.stdout.write("dry run: nothing changed; pass --apply to archive")

    def _verify(self, run_id: str, public_keys: str | None) -> None:
        try:
            findings = archived_bundle_findings(run_id=run_id,
                                                public_keys=Path(public_keys) if public_keys else None)
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        if findings:
            lines = "\n".join(f"  - {finding}" for finding in findings)
            raise CommandError(f"archived bundle does NOT verify (run {run_id}):\n{lines}")
        self.stdout.write(f"archived bundle verifies: run {run_id}")
