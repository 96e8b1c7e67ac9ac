"""``manage.py resume --all-orphaned``: every orphan resumed exactly once, live leases left alone
(DESIGN.md section 5.7). Real child processes (the command, and the pool it forks)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from runtime.engine import run_start
from runtime.models import Run, TraceEvent
from runtime.ownership.leases import lease_acquire
from tests.factories import write_scripted_task
from tests.helpers.procs import child_env, run_manage

pytestmark = pytest.mark.django_db(transaction=True)

DEAD = "dead-worker:1"
ALIVE = "alive-worker:2"


def _runs(tmp_path: Path, count: int) -> list[str]:
    ids = []
    for n in range(count):
        spec = write_scripted_task(tmp_path / f"run-{n}", steps=[
            {"target": "a.txt", "content": f"a {n}\n"}, {"target": "b.txt", "content": f"b {n}\n"}])
        ids.append(run_start(spec_path=spec, worker="creator"))
    return ids


def _lease_events(run_id: str) -> list[dict]:
    return list(TraceEvent.objects.filter(run_id=run_id, event_type="lease.acquired")
                .order_by("seq").values_list("payload", flat=True))


@pytest.mark.parametrize("jobs", ["1", "3"])
def test_it_resumes_every_orphan_exactly_once_and_leaves_live_leases_alone(
    tmp_path: Path, jobs: str
) -> None:
    orphans = _runs(tmp_path / "orphans", 4)
    live = _runs(tmp_path / "live", 1)[0]
    for run_id in orphans:  # a worker took these and died: its leases run out by the database clock
        lease_acquire(run_id=run_id, worker=DEAD, ttl_seconds=0.2)
    lease_acquire(run_id=live, worker=ALIVE, ttl_seconds=600)
    time.sleep(0.4)

    result = run_manage("resume", "--all-orphaned", "--jobs", jobs, env=child_env(), timeout=120)

    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("run ")]
    assert sorted(line.split()[1].rstrip(":") for line in lines) == sorted(orphans)
    assert all(line.endswith(": completed") for line in lines)
    assert "resumed 4 orphaned run(s): 4 completed" in result.stdout
    for run_id in orphans:
        takeovers = [p for p in _lease_events(run_id) if p.get("previous_owner") == DEAD]
        assert len(takeovers) == 1
        assert TraceEvent.objects.filter(run_id=run_id, event_type="recovery.succeeded").count() == 1
        assert Run.objects.get(run_id=run_id).phase == "completed"
    run = Run.objects.get(run_id=live)
    assert run.owner_worker == ALIVE and run.phase in ("running", "pending")
    assert _lease_events(live)[-1]["worker"] == ALIVE

    again = run_manage("resume", "--all-orphaned", env=child_env(), timeout=60)
    assert again.returncode == 0, again.stderr
    assert "resumed 0 orphaned run(s)" in again.stdout


def test_it_refuses_a_run_id_together_with_all_orphaned() -> None:
    result = run_manage("resume", "some-run", "--all-orphaned", env=child_env())
    assert result.returncode == 2
    assert "either RUN_ID or --all-orphaned" in result.stderr
