"""The drill's world: a PostgreSQL database pair of its own, processes of either release, reads.

The previous release cannot use the test database pytest-django made (that one is migrated by
the current code), so the drill creates its own main database and mark store on the test
server, named after this process, and drops them afterwards. Processes of both releases get the
same environment but their own code (``PYTHONPATH``, interpreter, ``manage.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import environ
import psycopg

from tests.celery.support import Worker
from tests.helpers.procs import MANAGE, ROOT, ChildResult, finish
from tests.upgrade.release import Release

DRILL_REDIS_URL = os.environ.get("RATCHET_TEST_DRILL_REDIS_URL", "redis://127.0.0.1:6379/13")
"""The one Redis database the drill owns (flushed before it runs)."""


@dataclass(frozen=True)
class Code:
    """One release's way to run things: its interpreter, its ``manage.py``, its folder."""

    name: str
    python: Path
    source: Path

    @classmethod
    def of(cls, release: Release) -> Code:
        return cls(name=f"release {release.version}", python=release.python, source=release.source)

    @classmethod
    def current(cls) -> Code:
        return cls(name="current", python=Path(sys.executable), source=ROOT)


@contextmanager
def drill_databases() -> Iterator[tuple[str, str]]:
    """``(main URL, mark store URL)``: two fresh databases on the server of ``DATABASE_URL``."""
    cfg = environ.Env.db_url_config(os.environ["DATABASE_URL"])
    auth = dict(host=cfg["HOST"] or "127.0.0.1", port=cfg["PORT"] or 5432, user=cfg["USER"],
                password=cfg.get("PASSWORD") or None)
    names = [f"ratchet_drill_{os.getpid()}", f"ratchet_drill_{os.getpid()}_marks"]
    with psycopg.connect(dbname="postgres", autocommit=True, **auth) as admin:
        for name in names:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
    base = f"postgres://{cfg['USER']}@{auth['host']}:{auth['port']}"
    try:
        yield f"{base}/{names[0]}", f"{base}/{names[1]}"
    finally:
        with psycopg.connect(dbname="postgres", autocommit=True, **auth) as admin:
            for name in names:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Drill:
    """Runs commands and workers of either release against the drill's databases and broker."""

    def __init__(self, *, main_url: str, marks_url: str, directory: Path) -> None:
        self.main_url = main_url
        self.directory = directory
        env = {k: v for k, v in os.environ.items() if not k.startswith("RATCHET_CRASH_AT")}
        env.update(DJANGO_SETTINGS_MODULE="runtime.project.settings", DATABASE_URL=main_url,
                   RATCHET_HWM_DATABASE_URL=marks_url, RATCHET_VAR_DIR=str(directory / "var"),
                   CELERY_BROKER_URL=DRILL_REDIS_URL, RATCHET_LEASE_SECONDS="2", RATCHET_SWEEP_SECONDS="1")
        self.env = env
        self.workers: list[Worker] = []

    def env_for(self, code: Code, **extra: str) -> dict[str, str]:
        return {**self.env, "PYTHONPATH": str(code.source), **extra}

    def spawn(self, code: Code, *args: str, **extra: str) -> subprocess.Popen[str]:
        """Start ``manage.py ARGS`` of ``code``; collect it with ``tests.helpers.procs.finish``."""
        manage = code.source / "manage.py" if code.source != ROOT else MANAGE
        return subprocess.Popen([str(code.python), str(manage), *args], cwd=code.source, text=True,
                                env=self.env_for(code, **extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def manage(self, code: Code, *args: str, timeout: float = 180, **extra: str) -> ChildResult:
        """``manage.py ARGS`` of ``code``, to completion."""
        return finish(self.spawn(code, *args, **extra), timeout=timeout)

    def manage_ok(self, code: Code, *args: str, **extra: str) -> str:
        result = self.manage(code, *args, **extra)
        if result.returncode != 0:
            raise AssertionError(f"{code.name}: manage.py {' '.join(args)} exited {result.returncode}:\n"
                                 f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
        return result.stdout

    def worker(self, code: Code, *args: str, name: str, wait: bool = True) -> Worker:
        """``manage.py worker ARGS --hostname NAME@drill`` of ``code`` (once ready, if ``wait``)."""
        manage = code.source / "manage.py" if code.source != ROOT else MANAGE
        log = self.directory / f"worker-{name}.log"
        # In the release's own folder: Celery puts the working directory first on sys.path, where
        # this repository's package metadata (and modules) would shadow the release's.
        with log.open("wb") as out:
            proc = subprocess.Popen([str(code.python), str(manage), "worker", "--concurrency", "1",
                                     "--hostname", f"{name}@drill", *args], cwd=code.source,
                                    env=self.env_for(code), stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        worker = Worker(name=name, proc=proc, log=log)
        self.workers.append(worker)
        if wait:
            worker.wait_ready(timeout=120)
        return worker

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.main_url) as conn:
            return conn.execute(sql, params).fetchall()

    def phase(self, run_id: str) -> tuple[str, int]:
        [(phase, generation)] = self.query("SELECT phase, generation FROM runtime_run WHERE run_id = %s", run_id)
        return phase, generation

    def events(self, run_id: str, event_type: str) -> list[dict[str, Any]]:
        rows = self.query("SELECT payload FROM runtime_traceevent WHERE run_id = %s AND event_type = %s ORDER BY id",
                          run_id, event_type)
        return [row[0] if isinstance(row[0], dict) else json.loads(row[0]) for row in rows]

    def combination(self, run_id: str) -> str:
        [(combination,)] = self.query("SELECT combination_id FROM runtime_combinationrun WHERE run_id = %s", run_id)
        return combination

    def wait_phase(self, run_id: str, phases: tuple[str, ...], *, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while True:
            phase, _ = self.phase(run_id)
            if phase in phases:
                return phase
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {w.name} ---\n{w.output()[-5000:]}" for w in self.workers)
                raise AssertionError(f"run {run_id} still {phase} after {timeout} s\n{logs}")
            time.sleep(0.1)

    def wait_event(self, run_id: str, event_type: str, *, timeout: float = 90) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while not (found := self.events(run_id, event_type)):
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {w.name} ---\n{w.output()[-5000:]}" for w in self.workers)
                raise AssertionError(f"no {event_type} in run {run_id} after {timeout} s\n{logs}")
            time.sleep(0.1)
        return found
