"""Story: workers only take runs pinned to the combinations they advertise (DESIGN.md section 8.4).

Real workers (``manage.py worker``) on the embedded broker: the fleet's default worker (with the
sweeper) finishes the run of the active combination and leaves the canary's run on the canary's
queue; a worker started with ``--combinations CANARY`` then finishes it. The quick variant of
the routing rule is in ``test_canary_rollback.py``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.engine import run_start
from runtime.models import Run
from runtime.rollout.combinations import combination_of_run, combination_queue, combination_register
from tests.celery.conftest import broker, replay_task, source, workers
from tests.celery.support import Worker, wait_for_phase
from tests.helpers.procs import MANAGE

__all__ = ["broker", "replay_task", "source", "workers"]

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_it_runs_each_run_on_a_worker_of_its_combination(replay_task: Path, tmp_path: Path,
                                                        workers: Callable[..., Worker]) -> None:
    old_run = run_start(spec_path=replay_task)
    fields = dict(combination_of_run(run_id=old_run).fields, code_version="canary-build")
    canary = combination_register(fields=fields, share=1.0, actor="ops", reason="new build").combination_id
    canary_run = run_start(spec_path=replay_task)
    assert combination_of_run(run_id=canary_run).combination_id == canary

    fleet = workers(name="fleet", command=[sys.executable, str(MANAGE), "worker", "--concurrency", "1"])
    assert wait_for_phase(old_run, ("completed", "failed", "needs_review"), timeout=120,
                          workers=[fleet]) == "completed"
    for _ in range(600):  # the sweeper queues the canary's run once it has been idle a sweep period
        if f"sweep: re-queueing run {canary_run}" in fleet.output():
            break
        time.sleep(0.1)
    assert f"sweep: re-queueing run {canary_run}" in fleet.output()
    assert Run.objects.get(run_id=canary_run).generation == 1  # queued for the canary, not taken

    canary_worker = workers(name="canary", command=[sys.executable, str(MANAGE), "worker", "--concurrency", "1",
                                                    "--no-beat", "--combinations", canary[:20]])
    assert wait_for_phase(canary_run, ("completed", "failed", "needs_review"), timeout=120,
                          workers=[fleet, canary_worker]) == "completed"
    assert combination_queue(canary) in canary_worker.output()
