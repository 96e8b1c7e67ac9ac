"""``manage.py verify_bundle FILE``: check a signed evidence bundle offline.

Needs no database and no secret: only public keys, from ``--public-keys FILE`` (written by
``manage.py keys export-public``) or the configuration (environment or the key file named by
``RATCHET_KEY_FILE``; never created here). When the checkpoint key is configured too (and no
``--public-keys`` is given), every envelope's HMAC is checked as well. Exits 0 printing ``bundle
verifies``, otherwise exits 1 listing every finding (``runtime.bundles.verification.bundle_verify``):
export signature, each checkpoint envelope, every approval and decision signature inside, the
committed envelope against the high-water mark, the trace hash chain and its time order, the
receipt fingerprints (DESIGN.md section 4.8).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.bundles.verification import bundle_load, bundle_trust, bundle_verify
from runtime.core.signing import TrustRoot
from runtime.errors import KeyringError, RatchetError
from runtime.keys import keyring_for


class Command(BaseCommand):
    help = "Verify an evidence bundle offline (no database): exit 0 if it verifies."
    # Offline tool: no system checks (runtime.E001 would create a key file, and the approval and
    # reviewer keyrings are not needed to verify a bundle).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the bundle JSON written by `manage.py export_bundle`")
        parser.add_argument("--public-keys", default=None,
                            help="a public-key file (`manage.py keys export-public`); default: the configured keys")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["file"])
        public = Path(options["public_keys"]) if options["public_keys"] else None
        try:
            bundle = bundle_load(path.read_bytes())
            checkpoint = None
            if public is None:
                try:
                    checkpoint = keyring_for(TrustRoot.CHECKPOINT, create=False)
                except KeyringError:
                    checkpoint = None  # an auditor without the secret: public keys alone
            trust = bundle_trust(public_keys=public, checkpoint=checkpoint)
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        findings = bundle_verify(bundle, checkpoint, trust=trust)
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
