"""Child process for the environment-fence stories: take and release one run's lease N times.

Usage: ``python -m tests.runtime.child_take_leases RUN_ID WORKER TIMES GO_FILE``. Waits for
``GO_FILE`` (so two children start together), then prints one JSON line with every lease version
(fencing token) it was handed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "runtime.project.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402

from runtime.ownership.leases import lease_acquire, lease_release  # noqa: E402


def main() -> int:
    run_id, worker, times, go = sys.argv[1:5]
    connection.ensure_connection()
    deadline = time.monotonic() + 60
    while not Path(go).exists() and time.monotonic() < deadline:
        time.sleep(0.002)
    tokens = []
    for _ in range(int(times)):
        lease = lease_acquire(run_id=run_id, worker=worker, ttl_seconds=30)
        tokens.append(lease.lease_version)
        lease_release(lease=lease)
    print(json.dumps({"tokens": tokens}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
