"""Helpers for the asymmetric-evidence stories: a worker configured with public keys only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.procs import ROOT, ChildResult, child_env

FORGER = Path(__file__).with_name("forger.py")


def worker_env(tmp_path: Path) -> dict[str, str]:
    """A worker's environment (DESIGN.md section 4.1): the checkpoint HMAC key and the public
    keys of the approval and reviewer roots, no private key of either, and no key file to fall
    back on (``ratchet_keys`` set the public keys)."""
    return child_env(RATCHET_APPROVAL_KEYS=None, RATCHET_REVIEWER_KEYS=None, RATCHET_EXPORT_KEYS=None,
                     RATCHET_KEY_FILE=str(tmp_path / "no-key-file.json"), RATCHET_CREATE_KEY_FILE="0")


def run_forger(*args: str, env: dict[str, str]) -> ChildResult:
    """Run ``forger.py ARGS`` as a worker process and return what it reported."""
    proc = subprocess.run([sys.executable, str(FORGER), *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    return ChildResult(proc.returncode, proc.stdout, proc.stderr)
