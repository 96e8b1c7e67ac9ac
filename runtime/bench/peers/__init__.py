"""The peers the ``scale`` bench compares Ratchet with, each in a virtual environment of its own.

A peer is a directory here holding ``requirements.txt`` and ``workload.py`` (run with the peer's
interpreter, never imported by Ratchet: the peer is no dependency of the product). Only DBOS
Transact for now (``dbos/``). :func:`peer_python` makes or reuses the peer's virtual environment
under ``VAR_DIR/bench/peers/<name>-venv`` with ``python -m venv`` and pip from the requirements
file (through pip's ordinary configuration), and says where its interpreter is.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from runtime.errors import BenchmarkError

PEERS = Path(__file__).resolve().parent
"""This directory: one sub-directory per peer."""

INSTALL_TIMEOUT_SECONDS = 900.0
"""How long making a peer's environment (venv + pip) may take before the bench gives up."""


def peer_workload(name: str) -> Path:
    """The workload script of peer ``name`` (``runtime/bench/peers/<name>/workload.py``)."""
    return PEERS / name / "workload.py"


def peer_python(*, name: str, var_dir: Path, say: Callable[[str], None] | None = None) -> Path:
    """The interpreter of peer ``name``'s virtual environment, made first if it is missing or
    was made from other requirements (a digest of ``requirements.txt`` is kept beside it).

    Raises:
        BenchmarkError: ``python -m venv`` or pip failed or took longer than
            :data:`INSTALL_TIMEOUT_SECONDS` (the message has the end of pip's output).
    """
    requirements = PEERS / name / "requirements.txt"
    want = hashlib.sha256(requirements.read_bytes()).hexdigest()
    venv = Path(var_dir) / "bench" / "peers" / f"{name}-venv"
    python, stamp = venv / "bin" / "python", venv / "requirements.sha256"
    if python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8").strip() == want:
        return python
    if say:
        say(f"making the {name} peer's virtual environment under {venv.parent.name}/ "
            f"(pip install -r {name}/requirements.txt)")
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    for argv in ([sys.executable, "-m", "venv", str(venv)],
                 [str(python), "-m", "pip", "install", "-q", "-r", str(requirements)]):
        try:
            done = subprocess.run(argv, capture_output=True, text=True,
                                  timeout=INSTALL_TIMEOUT_SECONDS, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BenchmarkError(f"cannot make the {name} peer's environment "
                                 f"({type(exc).__name__})", step=argv[1:3]) from None
        if done.returncode != 0:
            raise BenchmarkError(f"cannot make the {name} peer's environment",
                                 step=argv[1:3], output=(done.stderr or done.stdout)[-400:])
    stamp.write_text(want + "\n", encoding="utf-8")
    return python
