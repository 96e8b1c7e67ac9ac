"""Story: idempotency keys are derived before the write, and a retry never gets a new one.

DESIGN.md section 5: keys come from values that survive a crash (run id, plan cursor, replan
epoch). Two named failures are checked against the environment's own record -- the
``Idempotency-Key`` trailer on each commit:

* "generating the key after the write": the key is in the committed intent (checkpoint and
  ``intent.proposed`` trace event) before the adapter is called, and the commit carries it;
* "a new key per retry": a worker SIGKILLed after writing -- but before committing -- the
  intent checkpoint re-proposes the write on resume with the very same key, and a worker killed
  right before ``execute`` retries with the key it checkpointed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.core.idempotency import derive_key
from runtime.engine import run_advance, run_start
from runtime.models import Checkpoint, TraceEvent
from tests.engine.support import SOURCE_COMMITS, keyed_commits, restore, run_target, trace_events
from tests.helpers.procs import KILLED, child_env, run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def _expected_keys(run_id: str) -> list[str]:
    return [derive_key(run_id=run_id, cursor=c, replan_epoch=0) for c in range(SOURCE_COMMITS)]


def test_it_does_not_generate_the_key_after_the_write(replay_task: Path) -> None:
    run_id = run_start(spec_path=replay_task)
    run_advance(run_id=run_id, max_steps=1)
    pending = restore(run_id).state.pending
    assert pending.idempotency_key == derive_key(run_id=run_id, cursor=0, replan_epoch=0)
    assert keyed_commits(run_target(run_id)) == []  # checkpointed, not yet written

    run_advance(run_id=run_id)

    assert keyed_commits(run_target(run_id)) == _expected_keys(run_id)
    events = TraceEvent.objects.filter(run_id=run_id).order_by("seq")
    seq = {(e.event_type, e.payload.get("idempotency_key")): e.seq for e in events
           if e.event_type in ("intent.proposed", "write.executed")}
    for key in _expected_keys(run_id):
        assert seq[("intent.proposed", key)] < seq[("write.executed", key)]


def _killed_run(task: Path, crash_at: str) -> str:
    killed = run_manage("run", str(task), "--no-progress",
                        env=child_env(RATCHET_CRASH_AT=crash_at, RATCHET_LEASE_SECONDS="1"))
    assert killed.returncode == KILLED, killed.stderr
    return killed.stdout.splitlines()[0].removeprefix("run ")


def _resume(run_id: str) -> None:
    resumed = run_manage("resume", run_id, "--wait", "10", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert "verdict: completed" in resumed.stdout


def test_it_does_not_make_a_new_key_per_retry_when_the_intent_commit_was_lost(
    replay_task: Path,
) -> None:
    # The second checkpoint commit is the first intent; the kill lands after its row is inserted
    # and before its transaction commits, so the intent is lost and proposed again.
    run_id = _killed_run(replay_task, "checkpoint.after_append:2")
    _resume(run_id)

    rows = Checkpoint.objects.filter(run_id=run_id, generation=2)
    keys = {json.loads(bytes(r.envelope))["payload"]["pending"]["idempotency_key"] for r in rows}
    # One row: the lost commit left nothing (DESIGN.md section 4.3); the retry proposed the key
    # derived from the same cursor and epoch, and every key was written exactly once.
    assert rows.count() == 1
    assert keys == {derive_key(run_id=run_id, cursor=0, replan_epoch=0)}
    assert keyed_commits(run_target(run_id)) == _expected_keys(run_id)


def test_it_retries_with_the_checkpointed_key_after_a_kill_before_execute(
    replay_task: Path,
) -> None:
    run_id = _killed_run(replay_task, "engine.before_execute:2")
    checkpointed = restore(run_id).state.pending.idempotency_key
    _resume(run_id)

    assert checkpointed == derive_key(run_id=run_id, cursor=1, replan_epoch=0)
    assert keyed_commits(run_target(run_id)) == _expected_keys(run_id)
    proposed = [e["idempotency_key"] for e in trace_events(run_id, "intent.proposed")]
    assert proposed == _expected_keys(run_id)  # proposed once each: the retry reused the key
