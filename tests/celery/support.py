"""Helpers for the Celery stories: real worker processes, a real broker, real git histories.

Workers are ``python -m celery -A runtime worker`` child processes against the test database
(``tests.helpers.procs.child_env``). The broker is Redis (``RATCHET_TEST_REDIS_URL``, default
``redis://127.0.0.1:6379/11``, flushed before each story) on the PostgreSQL pass and the embedded
SQLite broker (a file under ``tmp_path``) on the SQLite pass. Every worker runs in its own
session, so the finalizer can stop exactly the processes a story started: SIGTERM to the worker
by pid, then SIGKILL to its process group (the worker and its pool) after a timeout.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from runtime.planners.git_history.history_builder import history_commit, history_init, history_write
from tests.helpers.procs import ROOT, child_env, wait_for

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/11"


def on_postgres() -> bool:
    from django.db import connection

    return connection.vendor == "postgresql"


# --- a small source history -------------------------------------------------------------------


def build_source(repo: Path, commits: int) -> None:
    """A root commit plus ``commits`` commits, each adding, editing or deleting a file.

    Fixed dates, so the same history (and the same intents) on every machine.
    """
    history_init(repo)
    history_write(repo, "README.md", "hello\n")
    history_commit(repo, "Initial import\n", date="2024-05-01T09:00:00+00:00")
    for i in range(1, commits + 1):
        history_write(repo, f"notes/{i:02d}.md", f"note {i}\n")
        if i % 2 == 0:
            history_write(repo, "README.md", f"hello\nedit {i}\n")
        if i % 3 == 0:
            (repo / f"notes/{i - 1:02d}.md").unlink()
        history_commit(repo, f"Step {i}\n", date=f"2024-05-{1 + i:02d}T09:00:00+00:00")


# --- brokers ----------------------------------------------------------------------------------


def redis_url() -> str:
    return os.environ.get("RATCHET_TEST_REDIS_URL", DEFAULT_REDIS_URL)


def redis_problem(url: str) -> str | None:
    """None if Redis at ``url`` answers; otherwise why not."""
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except (redis.exceptions.RedisError, OSError) as exc:
        return f"Redis at {url} is not reachable: {exc}"
    return None


def flush_redis(url: str) -> None:
    """Empty the one Redis database the stories own (never ``FLUSHALL``)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def sqlite_broker_url(directory: Path) -> str:
    return f"sqla+sqlite:///{directory / 'broker.sqlite3'}"


def expected_transport() -> str:
    """What the stories run on: Redis on the PostgreSQL pass, the SQLite broker otherwise."""
    return "redis://" if on_postgres() else "sqla+sqlite://"


# --- worker processes -------------------------------------------------------------------------


@dataclass
class Worker:
    """A ``celery worker`` child process and the file its output goes to."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    _stopped: bool = field(default=False, repr=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def transport(self) -> str:
        """The broker URL the worker printed in its banner (password masked)."""
        match = re.search(r"\.> transport:\s+(\S+)", self.output())
        return match.group(1) if match else ""

    def wait_ready(self, timeout: float = 60) -> None:
        wait_for(lambda: " ready." in self.output() or self.proc.poll() is not None,
                 timeout=timeout, what=f"worker {self.name} to start")
        if self.proc.poll() is not None:
            raise AssertionError(f"worker {self.name} exited with {self.proc.returncode}:\n"
                                 f"{self.output()[-4000:]}")

    def wait_exit(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"worker {self.name} still running after {timeout} s:\n"
                                 f"{self.output()[-4000:]}") from None

    def stop(self, timeout: float = 20) -> None:
        """Warm shutdown (SIGTERM to the worker's pid), then SIGKILL its process group."""
        if self._stopped:
            return
        self._stopped = True
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        # The group is the session this worker started: its pool and beat processes, nothing
        # else. Pool processes outlive a SIGKILLed parent, so they are reaped here too.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=5)


def worker_command(*, name: str, pool: str, concurrency: int, beat: bool, schedule: Path
                   ) -> list[str]:
    cmd = [sys.executable, "-m", "celery", "-A", "runtime", "worker", "--hostname", f"{name}@%h",
           "--pool", pool, "--concurrency", str(concurrency), "--loglevel", "INFO",
           "--without-gossip", "--without-mingle", "--without-heartbeat"]
    if beat:
        cmd += ["--beat", "--schedule", str(schedule)]
    return cmd


def start_process(*, directory: Path, name: str, command: list[str], env: dict[str, str]
                  ) -> Worker:
    """Start ``command`` in its own session with output to ``directory/worker-<name>.log``."""
    log = directory / f"worker-{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(command, env=env, cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    return Worker(name=name, proc=proc, log=log)


def start_worker(*, directory: Path, broker_url: str, name: str, pool: str = "prefork",
                 concurrency: int = 2, beat: bool = False, env: dict[str, str] | None = None
                 ) -> Worker:
    """Start a worker against the test database and ``broker_url``; output in ``directory``."""
    return start_process(
        directory=directory, name=name,
        command=worker_command(name=name, pool=pool, concurrency=concurrency, beat=beat,
                               schedule=directory / f"celerybeat-{name}"),
        env=child_env(CELERY_BROKER_URL=broker_url, **(env or {})),
    )


def wait_for_phase(run_id: str, phases: tuple[str, ...], *, timeout: float, workers: list[Worker]
                   ) -> str:
    """Poll the run's phase (database) until it is one of ``phases``; fail with worker logs."""
    from runtime.models import Run

    deadline = time.monotonic() + timeout
    while True:
        phase = Run.objects.filter(run_id=run_id).values_list("phase", flat=True).get()
        if phase in phases:
            return phase
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {w.name} ---\n{w.output()[-6000:]}" for w in workers)
            raise AssertionError(f"run {run_id} still {phase} after {timeout} s\n{logs}")
        time.sleep(0.05)
