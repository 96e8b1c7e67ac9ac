"""A pool process forked while the worker's presence thread writes can still use the database
(runtime/workers/presence.py; DESIGN.md sections 5.15 and 8.8).

Celery's main process forks pool processes (at start, and again whenever one dies) while its
presence thread renews the worker's row. On SQLite a child forked in the middle of that write
inherited the parent's in-memory record of the file lock and was refused every write for as
long as it lived. Here a real process renews its presence row without pause while it forks
children that each write at once.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from runtime.models import WorkerPresence
from tests.helpers.procs import ROOT, child_env

pytestmark = pytest.mark.django_db(transaction=True)

FORKS = 40

PARENT = """
import json, os, sys, time
import django
django.setup()
from runtime.workers.presence import PresenceBeat, worker_presence_write
beat = PresenceBeat(name="fork-parent", queues=["ratchet"], period=0.0005)
beat.start()
failures = []
for n in range(int(sys.argv[1])):
    time.sleep(0.002 * (n % 5))  # land the fork at different points of the parent's writes
    pid = os.fork()
    if pid == 0:
        try:
            worker_presence_write(name=f"fork-child-{n}", queues=["ratchet"])
        except Exception as exc:
            print(json.dumps({"child": n, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
            os._exit(3)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        failures.append(n)
beat.stop()
print(json.dumps({"failures": failures}), flush=True)
"""


def test_a_process_forked_during_a_presence_write_can_write():
    env = child_env(RATCHET_SQLITE_BUSY_TIMEOUT="2")
    done = subprocess.run([sys.executable, "-c", PARENT, str(FORKS)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"failures": []}, done.stdout[-2000:]
    assert WorkerPresence.objects.filter(name__startswith="fork-child-").count() == FORKS
