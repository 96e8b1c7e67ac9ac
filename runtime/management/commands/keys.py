"""``manage.py keys``: the public keys an auditor needs, and reviewers' own key files.

* ``keys export-public [--out FILE]`` writes the public keys of the approval, reviewer and export
  roots (JSON, no secret, no checkpoint key); ``verify_bundle --public-keys FILE`` uses it.
* ``keys agent-env --out FILE`` writes the environment of an agent process (mode 0600, a new
  file): the checkpoint key and the public keys of the other roots, never their private keys
  (DESIGN.md section 2.4). Only to a file: a key is never printed.
* ``keys reviewer-add NAME --out FILE`` creates NAME's own Ed25519 key file (mode 0600) and adds
  its public key, bound to NAME, to the reviewer trust root in the key file; NAME then decides
  with ``cases decide CASE_ID --key-file FILE``.

Never prints a private key (DESIGN.md section 4.1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.errors import RatchetError
from runtime.keys import (
    agent_env_write,
    public_keys_document,
    reviewer_key_create,
    reviewer_key_env_entries,
    reviewer_root_from_env,
)
from runtime.management.document_output import document_write


class Command(BaseCommand):
    help = "Keys: `export-public [--out FILE]`, `agent-env --out FILE`, `reviewer-add NAME --out FILE`."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        export = sub.add_parser("export-public", help="write the public keys for an auditor")
        export.add_argument("--out", default="-", help="file to write (default: stdout)")
        agent = sub.add_parser("agent-env", help="write an agent process's environment (no private key) to a new file")
        agent.add_argument("--out", required=True, help="the new file (mode 0600)")
        add = sub.add_parser("reviewer-add", help="create a reviewer's own key file")
        add.add_argument("name")
        add.add_argument("--out", required=True, help="the new private key file (give it to NAME only)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["action"] == "agent-env":
                names = agent_env_write(out=Path(options["out"]))
                self.stdout.write(f"{', '.join(names)} written to {options['out']} (mode 0600); start the agent "
                                  "process with them and RATCHET_PROCESS_ROLE=agent")
                return
            if options["action"] == "reviewer-add":
                key_id = reviewer_key_create(name=options["name"], out=Path(options["out"]))
                if reviewer_root_from_env():
                    public, binding = reviewer_key_env_entries(out=Path(options["out"]))
                    self.stdout.write(f"reviewer {options['name']}: key {key_id} written to {options['out']}. The "
                                      "reviewer trust root comes from the environment: add to every process\n"
                                      f"  RATCHET_REVIEWER_PUBLIC_KEYS: {public}\n"
                                      f"  RATCHET_REVIEWER_KEY_NAMES: {binding}")
                    return
                self.stdout.write(f"reviewer {options['name']}: key {key_id} written to {options['out']}; "
                                  "its public key is now in the reviewer trust root")
                return
            text = json.dumps(public_keys_document(), indent=2, sort_keys=True) + "\n"
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        except BrokenPipeError:
            raise  # the reader went away: manage.py ends quietly; the key file was written
        except OSError as exc:
            raise CommandError(f"cannot write the key file: {exc.strerror}") from None
        document_write(self, text=text, out=options["out"], what="the public keys")
