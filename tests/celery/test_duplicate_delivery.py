"""Story: the broker delivers the same advance_run message twice; the repository sees one commit
per Idempotency-Key (DESIGN.md section 5: one key, one business result).

A platform engineer starts a git-history replay and the queue hands the run's message to a real
worker twice (the same task id, as a redelivery after a lost acknowledgement would). The two
deliveries race for the lease; the loser is dropped, and from then on every message names the
generation it expects, so an outdated copy is dropped instead of starting a second chain.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.engine import run_start
from runtime.models import Run, TraceEvent
from tests.celery.conftest import SOURCE_COMMITS
from tests.celery.support import Worker, expected_transport, wait_for_phase
from tests.engine.support import key_effects

pytestmark = pytest.mark.django_db(transaction=True)

DONE = ("completed", "failed", "cancelled", "needs_review", "awaiting_approval")


def executed_keys(run_id: str) -> list[str]:
    return [payload["idempotency_key"] for payload in TraceEvent.objects.filter(
        run_id=run_id, event_type__in=("write.executed", "write.reconciled")
    ).order_by("seq").values_list("payload", flat=True)]


def test_it_completes_a_run_delivered_twice_with_one_commit_per_key(
    replay_task: Path, workers: Callable[..., Worker], send: Callable[..., None]
) -> None:
    run_id = run_start(spec_path=replay_task)
    worker = workers(name="alpha", env={"RATCHET_STEPS_PER_TASK": "1"})
    assert worker.transport().startswith(expected_transport())
    message_id = str(uuid.uuid4())

    send("ratchet.advance_run", run_id, task_id=message_id)
    send("ratchet.advance_run", run_id, task_id=message_id)

    assert wait_for_phase(run_id, DONE, timeout=120, workers=[worker]) == "completed"
    keys = executed_keys(run_id)
    assert len(keys) == SOURCE_COMMITS
    target = Path(Run.objects.get(run_id=run_id).spec["target"])
    assert key_effects(target) == {key: 1 for key in keys}
    # Both copies reached the worker, and the one that lost was dropped as a no-op.
    log = worker.output()
    assert log.count(f"ratchet.advance_run[{message_id}] received") == 2
    outcomes = re.findall(
        r"ratchet\.advance_run\[[^\]]+\] succeeded in [0-9.e-]+s: '([a-z_-]+)'", log)
    assert {"lease-held", "stale", "not-live"} & set(outcomes), outcomes
