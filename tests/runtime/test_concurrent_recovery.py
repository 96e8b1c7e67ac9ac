"""Concurrent recovery with real processes: the HWM stops rollback, the lease decides who goes on.

DESIGN.md section 4, Ownership: "the HWM ... does not decide which of two recovering workers
continues"; "a late checkpoint from an old worker is rejected". Every worker here is its own
process; the paused one is stopped with a real SIGSTOP, like a long GC pause or a frozen VM.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from runtime.checkpoints.protocol import checkpoint_commit, checkpoint_hwm, checkpoint_restore
from runtime.errors import LeaseHeldError
from runtime.models import Checkpoint
from runtime.ownership.leases import lease_acquire
from tests.factories import scenario_fingerprint
from tests.helpers.procs import finish, spawn_worker, wait_for
from tests.runtime.conftest import advance

pytestmark = pytest.mark.django_db(transaction=True)

TYPED_REFUSALS = {"LeaseHeldError", "LeaseLostError", "StaleGenerationError"}


def _abandoned_run(start_run) -> str:
    """A run whose worker died: its short lease has already expired by the database clock."""
    state, _ = start_run(worker="worker-dead", ttl_seconds=0.3)
    time.sleep(0.4)
    return state.identity.run_id


def _restored_marker(run_id: str) -> tuple[int, object]:
    restored = checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint())
    return restored.generation, restored.state.planner_state.get("marker")


def test_only_one_of_several_racing_recoverers_commits_the_next_generation(start_run, tmp_path):
    run_id = _abandoned_run(start_run)
    go = tmp_path / "go"
    names = [f"recoverer-{i}" for i in range(4)]
    procs = {
        name: spawn_worker(
            "race",
            "--run-id",
            run_id,
            "--worker",
            name,
            "--marker",
            name,
            "--ready",
            str(tmp_path / f"{name}.ready"),
            "--go",
            str(go),
        )
        for name in names
    }
    try:
        wait_for(
            lambda: all((tmp_path / f"{n}.ready").exists() for n in names), what="recoverers ready"
        )
        go.touch()
        results = {name: finish(proc) for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()

    outcomes = {name: r.last for name, r in results.items()}
    committed = [name for name, o in outcomes.items() if o["outcome"] == "committed"]
    assert len(committed) == 1, outcomes
    assert outcomes[committed[0]]["generation"] == 2
    refused = {o["error"] for name, o in outcomes.items() if name not in committed}
    assert refused <= TYPED_REFUSALS, outcomes
    assert checkpoint_hwm(run_id=run_id).generation == 2
    assert _restored_marker(run_id) == (2, committed[0])


def test_a_fenced_recoverer_loses_when_two_commit_the_same_generation_at_once(start_run, tmp_path):
    run_id = _abandoned_run(start_run)
    go = tmp_path / "go"
    first = spawn_worker(
        "prepared",
        "--run-id",
        run_id,
        "--worker",
        "recoverer-1",
        "--ttl",
        "0.5",
        "--marker",
        "first",
        "--ready",
        str(tmp_path / "1.ready"),
        "--go",
        str(go),
    )
    second = None
    try:
        wait_for((tmp_path / "1.ready").exists, what="first recoverer ready")
        time.sleep(0.7)  # recoverer-1's lease runs out while it is still preparing
        second = spawn_worker(
            "prepared",
            "--run-id",
            run_id,
            "--worker",
            "recoverer-2",
            "--ttl",
            "30",
            "--marker",
            "second",
            "--ready",
            str(tmp_path / "2.ready"),
            "--go",
            str(go),
        )
        wait_for((tmp_path / "2.ready").exists, what="second recoverer ready")
        go.touch()  # both commit generation 2 at the same moment
        one, two = finish(first), finish(second)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()

    assert [e["generation"] for e in one.events + two.events if e["outcome"] == "ready"] == [1, 1]
    assert two.last["outcome"] == "committed" and two.last["generation"] == 2, (
        two.last,
        two.stderr,
    )
    assert one.last["outcome"] == "error" and one.last["error"] == "LeaseLostError", (
        one.last,
        one.stderr,
    )
    assert _restored_marker(run_id) == (2, "second")


def test_a_paused_old_lease_holder_has_its_late_checkpoint_rejected(start_run, tmp_path):
    run_id = _abandoned_run(start_run)
    beat, go = tmp_path / "beat", tmp_path / "go"
    holder = spawn_worker(
        "heartbeat",
        "--run-id",
        run_id,
        "--worker",
        "worker-old",
        "--ttl",
        "1.0",
        "--marker",
        "late",
        "--beat",
        str(beat),
        "--go",
        str(go),
    )
    stopped = False
    try:
        wait_for(lambda: beat.exists() and int(beat.read_text() or 0) >= 2, what="two heartbeats")
        with pytest.raises(LeaseHeldError):  # while it renews, nobody can take the run
            lease_acquire(run_id=run_id, worker="worker-new", ttl_seconds=30)

        seen = beat.read_text()
        wait_for(lambda: beat.read_text() not in ("", seen), what="a fresh heartbeat")
        os.kill(holder.pid, signal.SIGSTOP)  # frozen between renewals, holding no database lock
        stopped = True
        time.sleep(1.3)  # its lease expires by the database clock

        lease = lease_acquire(run_id=run_id, worker="worker-new", ttl_seconds=30)
        restored = checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint())
        state = advance(restored.state, planner_state={"marker": "new"})
        checkpoint_commit(lease=lease, state=state, expected_generation=restored.generation)

        go.touch()
        os.kill(holder.pid, signal.SIGCONT)
        stopped = False
        late = finish(holder)
    finally:
        if holder.poll() is None:
            if stopped:
                os.kill(holder.pid, signal.SIGCONT)
            holder.kill()

    assert late.last["outcome"] == "error", (late.last, late.stderr)
    assert late.last["error"] == "LeaseLostError"
    assert checkpoint_hwm(run_id=run_id).generation == 2
    assert _restored_marker(run_id) == (2, "new")
    # Its checkpoint was never written: the fence failed inside the one commit transaction.
    assert Checkpoint.objects.filter(run_id=run_id, generation=2).count() == 1


def test_it_keeps_races_of_different_runs_independent(start_run, tmp_path):
    runs = [_abandoned_run(start_run) for _ in range(2)]
    go = tmp_path / "go"
    procs = [
        spawn_worker(
            "race",
            "--run-id",
            run_id,
            "--worker",
            f"w-{i}",
            "--marker",
            f"m-{i}",
            "--ready",
            str(tmp_path / f"{i}.ready"),
            "--go",
            str(go),
        )
        for i, run_id in enumerate(runs)
    ]
    try:
        wait_for(
            lambda: all((tmp_path / f"{i}.ready").exists() for i in range(2)), what="workers ready"
        )
        go.touch()
        results = [finish(p) for p in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()

    assert [r.last["outcome"] for r in results] == ["committed", "committed"], [
        r.stderr for r in results
    ]
    assert [_restored_marker(run_id) for run_id in runs] == [(2, "m-0"), (2, "m-1")]
