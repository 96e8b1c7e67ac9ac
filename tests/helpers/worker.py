"""A tiny worker process driven by the crash and concurrency tests.

Usage: ``python tests/helpers/worker.py ACTION --run-id R [options]``. It connects to the database
named by ``DATABASE_URL`` (and ``RATCHET_HWM_DATABASE_URL`` if set), does one thing through the
runtime's public services and prints one JSON object per line to stdout. Typed runtime errors are
reported as ``{"outcome": "error", "error": ClassName, "message": ...}`` with exit code 0, so a
test can tell "rejected as designed" from "crashed" (non-zero exit, traceback on stderr) and from
"SIGKILLed at a crash point" (exit -9).

Actions:
    create     run_create with a fresh state carrying ``--marker``.
    commit     take the lease, restore, commit the next generation (``--times N`` in a row).
    prepared   take the lease and restore, touch ``--ready``, wait for ``--go``, then commit.
    race       touch ``--ready``, wait for ``--go``, then take the lease, restore and commit.
    heartbeat  take the lease and restore, then renew every 0.3 s (writing the beat count to
               ``--beat``) until ``--go`` appears, then commit.
    restore    restore and report generation, marker and state version.
    under-o    the invariant checks that must hold under ``python -O``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "runtime.project.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402

from runtime.checkpoints.protocol import (  # noqa: E402
    checkpoint_commit,
    checkpoint_hwm,
    checkpoint_restore,
    run_create,
)
from runtime.core.checkpoint import Phase  # noqa: E402
from runtime.core.ledger import state_ledger  # noqa: E402
from runtime.errors import RatchetError  # noqa: E402
from runtime.ownership.leases import lease_acquire, lease_renew  # noqa: E402
from tests.core.builders import executed_for  # noqa: E402
from tests.factories import make_state, scenario_fingerprint  # noqa: E402


def emit(**fields: object) -> None:
    print(json.dumps(fields, default=str), flush=True)


def wait_file(path: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {path}")
        time.sleep(0.002)


def resume(run_id: str, worker: str, ttl: float):
    lease = lease_acquire(run_id=run_id, worker=worker, ttl_seconds=ttl)
    restored = checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint())
    return lease, restored


def next_state(state, marker: str):
    """The next state, with one executed write per commit in the receipts ledger (so every
    crash point of the commit protocol also has ledger rows in flight: DESIGN.md section 3.1)."""
    state = state.model_copy(deep=True)
    state.cursor += 1
    state.planner_state = {**state.planner_state, "marker": marker}
    state_ledger(state).record_executed(executed_for(f"ik-{marker}", cursor=state.cursor))
    return state


def commit(lease, restored, marker: str) -> None:
    result = checkpoint_commit(
        lease=lease,
        state=next_state(restored.state, marker),
        expected_generation=restored.generation,
        events=[("test.step", {"marker": marker})],
    )
    emit(
        outcome="committed",
        generation=result.generation,
        digest=result.digest,
        lease_version=result.lease.lease_version,
        marker=marker,
    )


def act(args: argparse.Namespace) -> None:
    if args.action == "create":
        state = make_state(run_id=args.run_id, planner_state={"marker": args.marker})
        result = run_create(state=state, worker=args.worker, ttl_seconds=args.ttl)
        emit(
            outcome="created",
            generation=result.generation,
            lease_version=result.lease.lease_version,
        )
    elif args.action == "commit":
        lease, restored = resume(args.run_id, args.worker, args.ttl)
        for i in range(args.times):
            marker = args.marker if args.times == 1 else f"{args.marker}-{i + 1}"
            state = next_state(restored.state, marker)
            result = checkpoint_commit(
                lease=lease, state=state, expected_generation=restored.generation
            )
            emit(outcome="committed", generation=result.generation, marker=marker)
            lease = result.lease
            restored = checkpoint_restore(
                run_id=args.run_id, scenario_fingerprint=scenario_fingerprint()
            )
    elif args.action == "prepared":
        lease, restored = resume(args.run_id, args.worker, args.ttl)
        emit(outcome="ready", generation=restored.generation, lease_version=lease.lease_version)
        Path(args.ready).touch()
        wait_file(args.go)
        commit(lease, restored, args.marker)
    elif args.action == "race":
        connection.ensure_connection()
        if args.ready:
            Path(args.ready).touch()  # set up and connected: only the start line is left
        wait_file(args.go)
        lease, restored = resume(args.run_id, args.worker, args.ttl)
        commit(lease, restored, args.marker)
    elif args.action == "heartbeat":
        lease, restored = resume(args.run_id, args.worker, args.ttl)
        beats = 0
        while not Path(args.go).exists():
            lease = lease_renew(lease=lease, ttl_seconds=args.ttl)
            beats += 1
            # Written after the renewal's transaction committed: the parent stops us only in the
            # sleep below, never while we hold a database lock.
            Path(args.beat).write_text(str(beats))
            time.sleep(0.3)
        commit(lease, restored, args.marker)
    elif args.action == "restore":
        restored = checkpoint_restore(
            run_id=args.run_id, scenario_fingerprint=scenario_fingerprint()
        )
        emit(
            outcome="restored",
            generation=restored.generation,
            marker=restored.state.planner_state.get("marker"),
            state_version=restored.state_version,
            ledger=restored.state.ledger.length,
        )
    elif args.action == "under-o":
        under_o(args.run_id)


def under_o(run_id: str) -> None:
    """DESIGN.md section 7: no invariant may rest on ``assert`` (gone under ``python -O``)."""
    emit(outcome="debug", debug=__debug__)
    first = run_create(state=make_state(run_id=run_id), worker="worker-a", ttl_seconds=0.5)
    first_state = checkpoint_restore(
        run_id=run_id, scenario_fingerprint=scenario_fingerprint()
    ).state
    invalid = first_state.model_copy(deep=True)
    invalid.phase = Phase.PENDING  # pending phase without a pending action
    try:
        checkpoint_commit(lease=first.lease, state=invalid, expected_generation=1)
        emit(outcome="invalid-state", error=None)
    except RatchetError as exc:
        emit(outcome="invalid-state", error=type(exc).__name__)
    unserialisable = first_state.model_copy(deep=True)
    unserialisable.planner_state = {"x": float("nan")}
    try:
        checkpoint_commit(lease=first.lease, state=unserialisable, expected_generation=1)
        emit(outcome="unserialisable", error=None)
    except RatchetError as exc:
        emit(outcome="unserialisable", error=type(exc).__name__)
    emit(outcome="hwm", generation=checkpoint_hwm(run_id=run_id).generation)
    time.sleep(0.7)  # worker-a's lease expires by the database clock
    lease_acquire(run_id=run_id, worker="worker-b", ttl_seconds=30)
    try:
        checkpoint_commit(
            lease=first.lease, state=next_state(first_state, "late"), expected_generation=1
        )
        emit(outcome="lost-lease", error=None)
    except RatchetError as exc:
        emit(outcome="lost-lease", error=type(exc).__name__)
    emit(outcome="hwm", generation=checkpoint_hwm(run_id=run_id).generation)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "action",
        choices=["create", "commit", "prepared", "race", "heartbeat", "restore", "under-o"],
    )
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--worker", default="worker-child")
    parser.add_argument("--ttl", type=float, default=30.0)
    parser.add_argument("--marker", default="m")
    parser.add_argument("--times", type=int, default=1)
    parser.add_argument("--ready")
    parser.add_argument("--go")
    parser.add_argument("--beat")
    args = parser.parse_args()
    try:
        act(args)
    except RatchetError as exc:
        emit(outcome="error", error=type(exc).__name__, message=str(exc))


if __name__ == "__main__":
    main()
