"""A Celery worker whose workspace writes can hang: ``python -m tests.telemetry.hanging_celery_worker
CELERY_ARGS...`` runs ``celery CELERY_ARGS``; with ``RATCHET_TEST_HANG_DIR`` set, the workspace
adapter's second ``execute`` in a process touches ``$RATCHET_TEST_HANG_DIR/hanging`` and never
returns (a write stuck in flight), so a test can SIGKILL the worker mid-step."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _hang_second_write(markers: Path) -> None:
    from runtime.adapters.workspace.adapter import WorkspaceAdapter

    original = WorkspaceAdapter.execute
    calls: list[int] = []

    def hanging_execute(self: WorkspaceAdapter, *args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            (markers / "hanging").touch()
            while True:  # until the test's SIGKILL
                time.sleep(1)
        return original(self, *args, **kwargs)

    WorkspaceAdapter.execute = hanging_execute  # type: ignore[method-assign]


if __name__ == "__main__":
    if os.environ.get("RATCHET_TEST_HANG_DIR"):
        _hang_second_write(Path(os.environ["RATCHET_TEST_HANG_DIR"]))
    from celery.__main__ import main

    sys.argv = ["celery", *sys.argv[1:]]
    sys.exit(main())
