"""Child process for the lease heartbeat stories: drive a run whose adapter call is slow.

Usage: ``python -m tests.engine.child_slow_call RUN_ID WORKER TTL_SECONDS CALL_SECONDS MARKER_DIR``. The
workspace adapter's ``execute`` touches ``MARKER_DIR/calling``, sleeps ``CALL_SECONDS`` (a slow
API or model call; ``go``: until ``MARKER_DIR/go`` exists) and then writes as usual. Prints one JSON
line: the step report, or ``{"outcome": "error", "error": ClassName}`` for a typed runtime error.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "runtime.project.settings")

import django  # noqa: E402

django.setup()

from runtime.adapters.workspace.adapter import WorkspaceAdapter  # noqa: E402
from runtime.engine import run_advance  # noqa: E402
from runtime.errors import RatchetError  # noqa: E402


def main() -> int:
    run_id, worker, ttl, call_seconds, markers = sys.argv[1:6]
    original = WorkspaceAdapter.execute

    def slow_execute(self: WorkspaceAdapter, *args: object, **kwargs: object) -> object:
        (Path(markers) / "calling").touch()
        if call_seconds == "go":  # paused until the parent says so
            deadline = time.monotonic() + 300
            while not (Path(markers) / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        else:
            time.sleep(float(call_seconds))
        (Path(markers) / "writing").touch()
        return original(self, *args, **kwargs)

    WorkspaceAdapter.execute = slow_execute  # type: ignore[method-assign]
    try:
        report = run_advance(run_id=run_id, worker=worker, ttl_seconds=float(ttl), max_steps=1)
    except RatchetError as exc:
        print(json.dumps({"outcome": "error", "error": type(exc).__name__}), flush=True)
        return 0
    print(json.dumps({"outcome": "stepped", "phase": report.phase, "events": report.events}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
