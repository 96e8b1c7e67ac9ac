"""Story: ``manage.py chaos --faults broker-restart`` restarts the broker empty under Celery-driven
runs, and every run still finishes exactly once (DESIGN.md section 8.8).

The operator asks for a campaign with the broker-restart fault. The command starts a
``redis-server`` of its own on a free loopback port (never the shared one), and a Celery worker
(``manage.py worker``, sweeper embedded) drives each run against it. At the seeded moments the
server is SIGKILLed while the worker holds the run (it keeps nothing on disk: every message is
lost), stays down for a while and comes back empty on the same port; the worker reconnects and
its sweeper re-queues the run. Every fault lands, every run completes with the uninterrupted
run's environment and one effect per key, and the server is gone when the command ends. Where
``redis-server`` is missing the command refuses before it makes anything (exit 2).
PostgreSQL pass (the scratch store is then a database of the server, as in production).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
from pathlib import Path

import pytest

from runtime.chaos.broker import BrokerServer
from runtime.chaos.campaign import chaos_campaign
from runtime.chaos.faults import FaultInjector
from runtime.errors import ChaosSetupError
from tests.chaos.test_chaos_command import SLOW_MACHINE
from tests.helpers.procs import child_env, run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def _redis_server_installed() -> None:
    if shutil.which("redis-server") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true and redis-server is not installed")
        pytest.skip("redis-server is not installed")


def _port_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


@SLOW_MACHINE
@pytest.mark.postgres
def test_it_completes_every_run_when_the_broker_restarts_empty(long_task: Path, tmp_path: Path) -> None:
    _redis_server_installed()
    workdir = tmp_path / "chaos"
    done = run_manage("chaos", str(long_task), "--json", "--workdir", str(workdir), "--runs", "3", "--kills", "2",
                      "--seed", "4", "--faults", "broker-restart", "--timeout", "300", timeout=900)
    assert done.stdout.startswith("{"), done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert (done.returncode, report["violations"], report["verdict"]) == (0, [], "PASS"), report
    assert (report["runs"], report["completed"], report["duplicates"]) == (3, 3, 0)
    assert report["faults"] == {"broker-restart": 6}
    assert report["kills_delivered"] == report["kills_requested"] == 6
    assert report["recoveries_failed"] == 0
    assert "_chaos_" in report["store"], "the runs went to a scratch database"

    workers = "\n".join(p.read_text(errors="replace") for p in (workdir / "logs").glob("*.err"))
    assert "Connection to broker lost" in workers, "the worker met the dead broker"
    assert "sweep: re-queueing run" in workers, "the sweeper gave the run back to a worker"
    redis_log = (workdir / "broker" / "redis.log").read_text(errors="replace")
    ports = set(re.findall(r"[Pp]ort[=: ]+(\d+)", redis_log))
    assert len(ports) == 1, "every restart came back on the same port"
    assert redis_log.count("Ready to accept connections") >= 1 + report["kills_total"]
    assert not _port_answers(int(ports.pop())), "the command stopped its broker"


def test_it_refuses_broker_restart_without_redis_server_before_making_anything(
        short_task: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "never-made"
    empty = tmp_path / "bin"
    empty.mkdir()
    done = run_manage("chaos", str(short_task), "--faults", "sigkill,broker-restart", "--workdir", str(workdir),
                      env=child_env(PATH=str(empty)), timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "redis-server is not on PATH" in done.stderr
    assert not workdir.exists(), "nothing was made"


def test_it_refuses_what_a_celery_driven_campaign_cannot_do(short_task: Path, tmp_path: Path) -> None:
    _redis_server_installed()
    with pytest.raises(ChaosSetupError, match="the campaign's own broker"):
        FaultInjector(workdir=tmp_path).check(["broker-restart"])
    injector = FaultInjector(workdir=tmp_path, broker=BrokerServer(directory=tmp_path / "broker"))
    with pytest.raises(ChaosSetupError, match="--crash-points"):
        chaos_campaign(spec=short_task, runs=1, kills=1, seed=1, crash_points=["engine.after_propose"],
                       workdir=tmp_path / "campaign", fault_kinds=("broker-restart",), injector=injector)
    assert not (tmp_path / "campaign").exists() and injector.broker.proc is None, "nothing ran"
