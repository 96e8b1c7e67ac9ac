"""A worker process is frozen (SIGSTOP) while it holds an environment's adapter lock. Another
worker does not interleave with it: it waits, then gives up with a retryable AdapterBusyError,
having written nothing. When the frozen worker resumes and releases the lock, writing works."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from runtime.adapters.git.adapter import GitAdapter
from runtime.adapters.workspace.adapter import WorkspaceAdapter
from runtime.errors import AdapterBusyError
from tests.adapters.support import Env

HOLD_LOCK = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("locked", flush=True)
    while True:
        time.sleep(0.05)
""")


def _lock_file(env: Env) -> Path:
    return env.path / (".git/ratchet.lock" if env.kind == "git" else ".ratchet/lock")


def test_a_frozen_lock_holder_makes_other_writers_wait_then_fail_retryably(env: Env) -> None:
    cls = GitAdapter if env.kind == "git" else WorkspaceAdapter
    impatient = cls(env.path, lock_timeout=0.3)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(_lock_file(env))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        holder.send_signal(signal.SIGSTOP)

        started = time.monotonic()
        with pytest.raises(AdapterBusyError) as caught:
            env.execute(env.write("notes/todo.txt", b"ship it\n"), "key-1", adapter=impatient)

        assert time.monotonic() - started >= 0.3
        assert caught.value.retryable
        assert not (env.path / "notes").exists()
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait(timeout=10)

    receipt = env.execute(env.write("notes/todo.txt", b"ship it\n"), "key-1")
    assert receipt.idempotency_key == "key-1"
