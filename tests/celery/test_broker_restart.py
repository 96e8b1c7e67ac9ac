"""Story: the broker dies mid-run and comes back empty; every run still finishes exactly once
(DESIGN.md sections 5.6 and 8.8).

A Redis server of the test's own (never the shared one) carries the messages of a worker with
the sweeper embedded. While five runs are in flight or queued it is SIGKILLed (it keeps nothing on disk, so
every queued message is lost), stays down for a while, and is started again on the same port.
Messages carry only run ids, so nothing of a run was in the broker: the worker reconnects, the
sweeper re-queues every run nobody drives (a lost message, a task whose acknowledgement went
nowhere), and each completes with one effect per key.
PostgreSQL pass (Redis belongs to it).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery

from runtime.engine import run_start
from runtime.models import Run
from tests.celery.support import start_worker, wait_for_phase
from tests.engine.support import write_scripted_task
from tests.gateway.support import effects_by_key, free_port
from tests.helpers.procs import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WRITES = 40
RUNS = 5
DONE = ("completed", "failed", "cancelled", "needs_review", "awaiting_approval")


class OwnRedis:
    """``redis-server`` on a free loopback port, in a session of its own, nothing on disk."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        with (self.directory / "redis.log").open("ab") as log:
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", str(self.directory)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        client = redis.Redis.from_url(self.url)
        wait_for(lambda: _pings(client), timeout=60, what="redis to answer")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    if shutil.which("redis-server") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and redis-server is not installed")
        pytest.skip("redis-server is not installed")
    server = OwnRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.mark.timeout(900)
def test_runs_finish_exactly_once_when_the_broker_restarts_empty(tmp_path: Path, own_redis: OwnRedis) -> None:
    steps = [{"target": f"notes/{i:02d}.txt", "content": f"note {i}\n"} for i in range(WRITES)]
    files = {f"notes/{i:02d}.txt": f"note {i}\n" for i in range(WRITES)}
    runs = [run_start(spec_path=write_scripted_task(tmp_path / f"run{i}", steps, files=files, absent=[],
                                                    budget=2 * WRITES + 10)) for i in range(RUNS)]
    worker = start_worker(directory=tmp_path, broker_url=own_redis.url, name="survivor", beat=True, concurrency=2,
                          env={"RATCHET_LEASE_SECONDS": "2", "RATCHET_SWEEP_SECONDS": "1"})
    try:
        worker.wait_ready()
        producer = Celery("broker-restart-producer", broker=own_redis.url, set_as_current=False)
        for run_id in runs:
            producer.send_task("ratchet.advance_run", args=[run_id], queue="ratchet")
        producer.close()
        # The broker dies as soon as work is under way: with two pool processes and five runs, some
        # runs are being driven and the others' messages wait in the broker (or in the worker's
        # prefetch), and are lost with it.
        wait_for(lambda: Run.objects.filter(run_id__in=runs, generation__gte=3).exists(),
                 timeout=180, what="a run to commit work")
        own_redis.kill()
        assert Run.objects.filter(run_id__in=runs).exclude(phase__in=DONE).exists(), "the runs finished too soon"
        down_at = time.monotonic()
        wait_for(lambda: "Cannot connect to redis" in worker.output() or "Connection to broker lost" in worker.output(),
                 timeout=120, what="the worker to notice the broker is gone")
        time.sleep(max(0.0, 2.0 - (time.monotonic() - down_at)))  # down for at least two sweep periods
        own_redis.start()
        phases = {run_id: wait_for_phase(run_id, DONE, timeout=400, workers=[worker]) for run_id in runs}
    finally:
        worker.stop()
    assert set(phases.values()) == {"completed"}, phases
    for i in range(RUNS):
        effects = effects_by_key(tmp_path / f"run{i}" / "workspace")
        assert len(effects) >= WRITES and set(effects.values()) == {1}, f"run {i}: one effect per key"
