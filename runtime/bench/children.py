"""The child processes a bench starts: their command line and environment, the broker of a
bench's Celery worker, and stopping that worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from runtime.bench.scratch import BROKER_ENV


def manage_argv(*args: str) -> list[str]:
    """``python manage.py *args`` with this interpreter and the project's ``manage.py``."""
    return [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), *args]


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment plus ``extra``; an inherited crash point is dropped, so only a
    child told to crash (``extra``) does."""
    env = {k: v for k, v in os.environ.items() if k != "RATCHET_CRASH_AT"}
    env.update(extra)
    return env


def bench_broker_url(work: Path) -> str:
    """The broker a bench's Celery worker uses: the server broker :data:`BROKER_ENV` names
    (Redis, RabbitMQ), measured as configured; else, for the embedded default, a SQLite broker
    file of its own under ``work`` (so no old message is in it)."""
    url = os.environ.get(BROKER_ENV) or settings.CELERY_BROKER_URL
    if url.split("://", 1)[0].lower().startswith(("sqla+", "sqlalchemy+")):
        return f"sqla+sqlite:///{work / 'broker.sqlite3'}"
    return url


def worker_stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a worker this bench started with ``start_new_session=True``: SIGTERM to it, then
    SIGKILL to its session (pool and beat processes), by its pid."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait(timeout=30)
