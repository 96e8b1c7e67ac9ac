"""Child process for the OTLP story: a worker process with tracing on, driving one run.

Usage: ``python -m tests.telemetry.child_traced_worker RUN_ID WORKER MARKER_DIR [hang]``. Tracing
starts as in any process of the project: from the environment (``OTEL_EXPORTER_OTLP_ENDPOINT``)
when Django sets up. With ``hang``, the workspace adapter's second ``execute`` touches
``MARKER_DIR/hanging`` and never returns (a write stuck in flight), so the parent can SIGKILL the
process mid-step. Prints the step report as one JSON line and exits normally, which flushes the
spans still queued.
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


def main() -> int:
    run_id, worker, markers = sys.argv[1:4]
    if sys.argv[4:] == ["hang"]:
        original = WorkspaceAdapter.execute
        calls = []

        def hanging_execute(self: WorkspaceAdapter, *args: object, **kwargs: object) -> object:
            calls.append(1)
            if len(calls) == 2:
                (Path(markers) / "hanging").touch()
                while True:  # until the parent's SIGKILL
                    time.sleep(1)
            return original(self, *args, **kwargs)

        WorkspaceAdapter.execute = hanging_execute  # type: ignore[method-assign]
    report = run_advance(run_id=run_id, worker=worker, wait_seconds=60)
    print(json.dumps({"phase": report.phase, "recovered": report.recovered, "steps": report.steps}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
