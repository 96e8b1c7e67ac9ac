"""Story: the embedded default's one command, ``manage.py worker``, runs a worker and the sweeper.

A platform engineer on a fresh machine starts ``manage.py worker`` and nothing else: no broker
server, no separate beat. A run that nobody enqueued (created, then forgotten) is found by the
embedded sweeper once it has been idle for a sweep period, and driven to completion.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings

from runtime.engine import run_start
from runtime.management.commands.worker import worker_argv
from runtime.models import Run
from tests.celery.support import Worker, wait_for_phase
from tests.engine.support import key_effects
from tests.helpers.procs import MANAGE

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_finds_and_finishes_a_run_nobody_enqueued(
    replay_task: Path, workers: Callable[..., Worker]
) -> None:
    run_id = run_start(spec_path=replay_task)

    worker = workers(name="embedded",
                     command=[sys.executable, str(MANAGE), "worker", "--concurrency", "1"])

    assert wait_for_phase(run_id, ("completed", "failed", "needs_review"), timeout=120,
                          workers=[worker]) == "completed"
    output = worker.output()
    assert "beat: Starting..." in output
    assert f"sweep: re-queueing run {run_id} at generation 1 (idle)" in output
    effects = key_effects(Path(Run.objects.get(run_id=run_id).spec["target"]))
    assert len(effects) == 5 and set(effects.values()) == {1}


def test_it_embeds_beat_with_its_schedule_under_the_var_dir() -> None:
    argv = worker_argv(concurrency=3, loglevel="info", pool="prefork", beat=True,
                       queues="ratchet", hostname=None,
                       broker_url="sqla+sqlite:///var/broker.sqlite3")

    assert argv[0] == "worker"
    assert argv[argv.index("--schedule") + 1] == str(settings.CELERY_BEAT_SCHEDULE_FILENAME)
    assert str(settings.CELERY_BEAT_SCHEDULE_FILENAME).startswith(str(settings.VAR_DIR))
    assert {"--beat", "--without-gossip", "--without-mingle", "--without-heartbeat"} <= set(argv)
    assert argv[argv.index("--concurrency") + 1] == "3"


def test_it_keeps_worker_to_worker_messages_where_the_broker_carries_them() -> None:
    argv = worker_argv(concurrency=2, loglevel="info", pool="prefork", beat=False,
                       queues="ratchet", hostname="east@%h", broker_url="redis://127.0.0.1/0")

    assert "--beat" not in argv and "--schedule" not in argv
    assert "--without-mingle" not in argv
    assert argv[argv.index("--hostname") + 1] == "east@%h"
