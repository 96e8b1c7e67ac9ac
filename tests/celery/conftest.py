"""Fixtures for the Celery stories: keys, a broker per pass, worker processes, a source history."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from tests.celery.support import (
    Worker,
    build_source,
    flush_redis,
    on_postgres,
    redis_problem,
    redis_url,
    sqlite_broker_url,
    start_process,
    start_worker,
)
from tests.engine.support import write_replay_task
from tests.helpers.keys import TestKey
from tests.helpers.procs import child_env

SOURCE_COMMITS = 5


@pytest.fixture(autouse=True)
def keys(ratchet_keys: dict[str, TestKey]) -> dict[str, TestKey]:
    """Fresh keys in the environment, inherited by every worker process."""
    return ratchet_keys


@pytest.fixture
def broker(tmp_path: Path) -> str:
    """Redis (one database of its own, flushed) on the PostgreSQL pass; SQLite otherwise.

    Outside CI a missing Redis skips with the reason; with ``CI=true`` it fails.
    """
    if not on_postgres():
        return sqlite_broker_url(tmp_path)
    url = redis_url()
    problem = redis_problem(url)
    if problem:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {problem}")
        pytest.skip(f"{problem} (set RATCHET_TEST_REDIS_URL or start Redis)")
    flush_redis(url)
    return url


@pytest.fixture
def workers(tmp_path: Path, broker: str) -> Iterator[Callable[..., Worker]]:
    """``start(name=, pool=, concurrency=, beat=, env=, command=)`` starts a ready worker.

    Each has ``RATCHET_LEASE_SECONDS=2`` and ``RATCHET_SWEEP_SECONDS=1`` unless ``env`` says
    otherwise; ``command`` replaces the ``celery worker`` command line (e.g. ``manage.py
    worker``). All are stopped (by pid) when the story ends.
    """
    started: list[Worker] = []

    def start(*, name: str, pool: str = "prefork", concurrency: int = 2, beat: bool = False,
              env: dict[str, str] | None = None, command: list[str] | None = None,
              wait: bool = True) -> Worker:
        merged = {"RATCHET_LEASE_SECONDS": "2", "RATCHET_SWEEP_SECONDS": "1", **(env or {})}
        if command is None:
            worker = start_worker(directory=tmp_path, broker_url=broker, name=name, pool=pool,
                                  concurrency=concurrency, beat=beat, env=merged)
        else:
            worker = start_process(directory=tmp_path, name=name, command=command,
                                   env=child_env(CELERY_BROKER_URL=broker, **merged))
        started.append(worker)
        if wait:
            worker.wait_ready()
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def send(broker: str) -> Iterator[Callable[..., None]]:
    """``send(task_name, *args, task_id=None)`` publishes a message as any producer would."""
    options: dict[str, Any] = {}
    if broker.startswith("sqla+sqlite"):
        options = {"connect_args": {"timeout": 30}}
    app = Celery("ratchet-test-producer", broker=broker, set_as_current=False)
    app.conf.update(broker_transport_options=options, task_serializer="json",
                    broker_connection_retry_on_startup=True)

    def publish(task_name: str, *args: Any, task_id: str | None = None) -> None:
        app.send_task(task_name, args=list(args), queue="ratchet", task_id=task_id)

    yield publish
    app.close()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("history") / "source"
    build_source(path, SOURCE_COMMITS)
    return path


@pytest.fixture
def replay_task(tmp_path: Path, source: Path) -> Path:
    """A git-history replay of the source's last five commits (setup = clone-at-base)."""
    return write_replay_task(tmp_path / "replay", source, count=SOURCE_COMMITS, task_id="celery-replay")
