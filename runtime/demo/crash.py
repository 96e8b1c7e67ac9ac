"""The demo's crash and recovery: a real run process SIGKILLed mid-run and recovered by another.

``manage.py run`` starts the run in a child process armed with a crash point
(``RATCHET_CRASH_AT``, :mod:`runtime.core.crashpoints`) and a one-second lease, so the child
kills itself with SIGKILL between a write and its checkpoint; the seeder then advances the run
under its own lease once the dead one expired. The restore, the receipt lookup and the
``recovery.started`` / ``recovery.succeeded`` events are the runtime's own (DESIGN.md section 5),
so Health's recovery figures show one real recovery with its duration.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from runtime.engine import run_advance
from runtime.errors import DemoSetupError

CRASH_POINT = "engine.after_execute:2"
"""Where the child dies: after its second write reached the adapter, before the checkpoint."""

CHILD_SECONDS = 180.0
"""How long the child may run before the seeder gives up on it (it is killed, by pid)."""

RECOVER_WAIT_SECONDS = 60.0
"""How long the recovering advance waits for the dead child's lease to expire (seconds)."""


def crashed_run_recover(*, spec: Path, worker: str, crash_at: str = CRASH_POINT) -> str:
    """Start ``spec`` in a child that SIGKILLs itself at ``crash_at``, recover it here; return
    the run id.

    Args:
        spec: the task spec the child runs (``manage.py run SPEC``); its run id is read from the
            child's first output line.
        worker: the lease identity the recovery runs under (not the dead child's).
        crash_at: the crash point (``name`` or ``name:hit``) the child is armed with.

    Raises:
        DemoSetupError: the child was not killed at the crash point (it finished, failed or
            overran ``CHILD_SECONDS``), or announced no run id.
        RatchetError subclasses from the recovery itself (``run_advance``).
    """
    env = {**os.environ, "RATCHET_CRASH_AT": crash_at, "RATCHET_LEASE_SECONDS": "1"}
    command = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "run", str(spec), "--no-progress"]
    try:
        child = subprocess.run(command, env=env, cwd=settings.BASE_DIR, capture_output=True, text=True,
                               timeout=CHILD_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        raise DemoSetupError(f"the crashing run of {spec.name} did not stop within {CHILD_SECONDS:g} s") from None
    first = (child.stdout.splitlines() or [""])[0]
    if child.returncode != -signal.SIGKILL or not first.startswith("run "):
        tail = child.stderr.strip().splitlines()[-1:] or ["no output"]
        raise DemoSetupError(f"the run of {spec.name} was not killed at {crash_at} "
                             f"(exit status {child.returncode}: {tail[0]})")
    run_id = first.removeprefix("run ").strip()
    run_advance(run_id=run_id, worker=worker, wait_seconds=RECOVER_WAIT_SECONDS)
    return run_id
