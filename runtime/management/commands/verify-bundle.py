"""``manage.py verify-bundle FILE``: check a signed evidence bundle offline.

Needs no database, only the checkpoint keyring (``RATCHET_CHECKPOINT_KEYS`` or the key file named
by ``RATCHET_KEY_FILE``; the file is never created here). Exits 0 printing ``bundle verifies``,
otherwise exits 1 listing every finding (``runtime.bundle_verification.bundle_verify``): bundle
MAC, each checkpoint envelope, the committed envelope against the high-water mark, the trace hash
chain, the receipt fingerprints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.bundle_verification import bundle_load, bundle_verify
from runtime.core.signing import TrustRoot
from runtime.errors import RatchetError
from runtime.keys import keyring_for


class Command(BaseCommand):
    help = "Verify an evidence bundle offline (no database): exit 0 if it verifies."
    # Offline tool: no system checks (runtime.E001 would create a key file, and the approval and
    # reviewer keyrings are not needed to verify a bundle).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the bundle JSON written by `manage.py export-bundle`")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["file"])
        try:
            bundle = bundle_load(path.read_bytes())
            keyring = keyring_for(TrustRoot.CHECKPOINT, create=False)
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        findings = bundle_verify(bundle, keyring)
        run_id = (
            bundle.get("run", {}).get("run_id") if isinstance(bundle.get("run"), dict) else None
        )
        if findings:
            lines = "\n".join(f"  - {finding}" for finding in findings)
            raise CommandError(f"bundle does NOT verify (run {run_id}):\n{lines}")
        events = len(bundle.get("trace", []))
        generation = bundle.get("high_water_mark", {}).get("generation")
        self.stdout.write(
            f"bundle verifies: run {run_id}, committed generation {generation}, "
            f"{events} trace events"
        )
