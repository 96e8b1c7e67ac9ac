"""Story: a stale worker that passed its lease check cannot write after the new holder looked
its key up (DESIGN.md section 4.6).

A real child process takes the run's write step, passes the engine's lease check and stalls just
before the adapter call, its lease left to run out. A new holder takes the run over, looks the
key up (no receipt), and an operator's cancel drops the write. When the stalled worker wakes up,
the adapter refuses its token -- the new holder's look-up raised the fence -- and nothing is
written after the cancel.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.decisions.cancellation import run_request_cancel
from runtime.engine import run_advance
from runtime.models import ReviewCase
from tests.engine.slow_calls import pending_run, spawn_slow_worker, wait_for_the_call
from tests.engine.support import restore, run_target, trace_events, workspace_journal
from tests.helpers.procs import events

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_stale_worker_cannot_write_after_the_new_holder_looked_the_key_up(tmp_path: Path) -> None:
    run_id = pending_run(tmp_path)
    markers = tmp_path / "markers"
    # No heartbeat for the stalled worker: its lease runs out while it stands before the write.
    child = spawn_slow_worker(run_id, ttl=1.0, call="go", markers=markers, RATCHET_MAX_CALL_SECONDS="0.01")
    wait_for_the_call(child, markers)

    run_request_cancel(run_id=run_id, requested_by="olivia")
    taken = run_advance(run_id=run_id, worker="new-holder", ttl_seconds=30, wait_seconds=30)
    (markers / "go").touch()
    stdout, stderr = child.communicate(timeout=120)

    assert (taken.phase, taken.stop_reason) == ("cancelled", "cancelled"), taken
    assert child.returncode == 0, stderr
    assert events(stdout) == [{"outcome": "error", "error": "LeaseLostError"}]
    workspace = run_target(run_id)
    assert not (workspace / "notes" / "slow.txt").exists()
    assert [r for r in workspace_journal(workspace) if r["type"] == "committed"] == []
    (refused,) = trace_events(run_id, "fence.refused")
    assert refused["worker"] == "slow-worker" and refused["fencing_token"] < refused["newest_seen"]
    assert restore(run_id).state.phase.value == "cancelled"
    assert not ReviewCase.objects.filter(run_id=run_id).exists()
