"""Start child processes against the test database and read what they report.

Children run ``tests/helpers/worker.py`` with ``sys.executable`` and the parent's environment,
plus ``DATABASE_URL`` pointing at the database pytest-django created (a real file on SQLite, the
``test_*`` database on PostgreSQL). They print one JSON object per line; :func:`events` parses them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("worker.py")
MANAGE = ROOT / "manage.py"

KILLED = -signal.SIGKILL
"""``returncode`` of a child that SIGKILLed itself at a crash point."""


def database_url(alias: str = "default") -> str:
    """URL of the database Django is connected to under ``alias`` (the test database in tests)."""
    from django.db import connections

    cfg = connections[alias].settings_dict
    if cfg["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{cfg['NAME']}"
    auth = quote(cfg.get("USER") or "", safe="")
    if cfg.get("PASSWORD"):
        auth += ":" + quote(cfg["PASSWORD"], safe="")
    host, port = cfg.get("HOST") or "127.0.0.1", cfg.get("PORT") or 5432
    return f"postgres://{auth}@{host}:{port}/{cfg['NAME']}"


def child_env(**overrides: str | None) -> dict[str, str]:
    """The parent's environment for a child; ``None`` removes a variable.

    Always sets ``DATABASE_URL`` to the test database and ``RATCHET_HWM_DATABASE_URL`` to the
    test high-water mark store (unless overridden: a child given another ``DATABASE_URL`` but no
    mark store gets the default one beside it, DESIGN.md section 4.2), ``RATCHET_VAR_DIR`` to the
    parent's var dir and ``PYTHONPATH`` to the repository root; never inherits an armed crash
    point by accident.
    """
    from django.conf import settings

    env = dict(os.environ)
    env.pop("RATCHET_CRASH_AT", None)
    env.pop("RATCHET_HWM_DATABASE_URL", None)
    env["PYTHONPATH"] = str(ROOT)
    env["DJANGO_SETTINGS_MODULE"] = "runtime.project.settings"
    env["RATCHET_VAR_DIR"] = str(settings.VAR_DIR)
    if "DATABASE_URL" not in overrides:
        env["DATABASE_URL"] = database_url()
        if "hwm" in settings.DATABASES:
            # The same mark store as this test: the child's own default would be another one.
            env["RATCHET_HWM_DATABASE_URL"] = database_url("hwm")
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


@dataclass
class ChildResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict]:
        return events(self.stdout)

    @property
    def last(self) -> dict:
        found = self.events
        if not found:
            raise AssertionError(
                f"child reported nothing; rc={self.returncode}\nstderr:\n{self.stderr}"
            )
        return found[-1]


def events(stdout: str) -> list[dict]:
    """The JSON objects a child printed, one per line (other lines are ignored)."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def worker_cmd(*args: str, optimize: bool = False) -> list[str]:
    return [sys.executable, *(["-O"] if optimize else []), str(WORKER), *args]


def run_worker(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60, optimize: bool = False
) -> ChildResult:
    """Run ``worker.py ARGS`` to completion and return its result."""
    proc = subprocess.run(
        worker_cmd(*args, optimize=optimize),
        env=env or child_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return ChildResult(proc.returncode, proc.stdout, proc.stderr)


def run_manage(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> ChildResult:
    """Run ``manage.py ARGS`` in a child process."""
    proc = subprocess.run(
        [sys.executable, str(MANAGE), *args],
        env=env or child_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return ChildResult(proc.returncode, proc.stdout, proc.stderr)


def spawn_worker(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``worker.py ARGS`` without waiting; read it with :func:`finish`."""
    return subprocess.Popen(
        worker_cmd(*args),
        env=env or child_env(),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> ChildResult:
    """Wait for a spawned child (killing it, by pid, if it overruns) and return its result."""
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    return ChildResult(proc.returncode, stdout, stderr)


def wait_for(
    predicate: Callable[[], bool], *, timeout: float = 30, what: str = "condition"
) -> None:
    """Poll ``predicate`` every 5 ms until true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def wait_listening(proc: subprocess.Popen, port: int, *, what: str, timeout: float = 90) -> None:
    """Wait until our child ``proc`` accepts connections on 127.0.0.1:``port``; fail the test,
    after killing it, if it exits first or ``timeout`` seconds pass (a loaded machine imports
    Django slowly)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited: {proc.stderr.read() if proc.stderr else ''!r}")
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise AssertionError(f"{what} did not start")


def run_killed_at(task: Path, point: str, **env: str) -> str:
    """Start ``task`` with ``manage.py run`` in a child armed to SIGKILL itself at crash point
    ``point`` (``name`` or ``name:hit``) with a 1-second lease (``env``: more settings for the
    child); return the run id it announced."""
    killed = run_manage("run", str(task), "--no-progress",
                        env=child_env(RATCHET_CRASH_AT=point, RATCHET_LEASE_SECONDS="1", **env))
    if killed.returncode != KILLED:
        raise AssertionError(f"the run was not killed at {point}: {killed.stderr[-500:]}")
    return killed.stdout.splitlines()[0].removeprefix("run ")
