"""Story: with ``RATCHET_FOLD_INTENTS`` on (the default), a planner that proposes at once gets one checkpoint per
write in steady state -- the receipt of write N and the intent of write N+1 commit together --
and every crash window still holds (DESIGN.md sections 4.13 and 5.3).

* counted on the database in use (SQLite or PostgreSQL): a 20-write scripted workspace run
  averages at most 1.2 durable main-database transactions per write, never more than 2 for one;
* SIGKILL at every engine, checkpoint and workspace crash point a folded run hits -- at the hit
  that falls inside a folded commit or right around it -- then resume in a new process: every
  file is written exactly once, every key has exactly one committed journal record, and the
  recovery is clean;
* a proposal that must wait (an approval) still gets a checkpoint of its own.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from django.test import override_settings

import runtime.adapters.workspace.adapter
import runtime.checkpoints.protocol
import runtime.checkpoints.transaction
import runtime.engine.complete
import runtime.engine.execute
import runtime.engine.propose
import runtime.engine.settle
from runtime.checkpoints.protocol import checkpoint_restore
from runtime.engine import run_advance, run_start
from runtime.engine.advance import StepReport
from runtime.models import Run, TraceEvent
from tests.engine.support import WORKSPACE_STEPS, crash_point_hits, write_scripted_task
from tests.engine.test_crash_matrix import (
    KILLED_LEASE_SECONDS,
    _assert_recovered_cleanly,
    _assert_workspace_written_exactly_once,
)
from tests.helpers.db_counts import db_counting
from tests.helpers.procs import KILLED, child_env, run_manage

pytestmark = pytest.mark.django_db(transaction=True)

WRITES = 20
MAX_MEAN_MAIN_TRANSACTIONS_PER_WRITE = 1.2
MAX_MAIN_TRANSACTIONS_FOR_ONE_WRITE = 2

FOLDED_HITS = {
    # creation, the first intent, one folded commit per write but the last, the last receipt,
    # the completion
    **{p: len(WORKSPACE_STEPS) + 3 for p in (
        "checkpoint.after_ledger_rows", "checkpoint.after_append", "checkpoint.before_hwm_cas",
        "checkpoint.after_hwm_cas", "checkpoint.after_commit")},
    # the first proposal, one inside each receipt's step (the last one answers "done" and is
    # asked again by the next step)
    "engine.before_propose": len(WORKSPACE_STEPS) + 2,
    "engine.after_intent_commit": len(WORKSPACE_STEPS),
    "engine.before_execute": len(WORKSPACE_STEPS),
    "engine.after_execute": len(WORKSPACE_STEPS),
    "engine.after_receipt_cache": len(WORKSPACE_STEPS),
    "engine.after_step_commit": len(WORKSPACE_STEPS),
    "engine.before_verify": 1,
    **{p: len(WORKSPACE_STEPS) for p in (
        "workspace.before_write", "workspace.after_prepare", "workspace.before_rename",
        "workspace.after_rename", "workspace.after_write")},
}
"""How often a folded five-write run hits each point (checked by the first test)."""

KILLS = [
    # inside the first folded commit (the 3rd commit of the run) and right after it
    *[(p, 3) for p in ("checkpoint.after_ledger_rows", "checkpoint.after_append",
                       "checkpoint.before_hwm_cas", "checkpoint.after_hwm_cas",
                       "checkpoint.after_commit")],
    ("engine.before_propose", 2),  # asking for write 2 while write 1 is settled
    ("engine.after_receipt_cache", 1),
    ("engine.after_step_commit", 1),
    ("engine.after_intent_commit", 2),  # the folded intent of write 2
    ("engine.before_execute", 2),
    ("engine.after_execute", 2),
    ("workspace.after_rename", 2),
    ("workspace.after_write", 2),
]


def _resume_folded_until_done(run_id: str) -> int:
    """Resume, folding too, in new processes (at most three) until the run completes."""
    for attempt in range(1, 4):
        resumed = run_manage("resume", run_id, "--wait", "10", "--no-progress",
                             env=child_env(RATCHET_FOLD_INTENTS="1"))
        if resumed.returncode == 0 and "verdict: completed" in resumed.stdout:
            return attempt
    raise AssertionError(f"run {run_id} did not complete after 3 resumes:\n"
                         f"{resumed.stdout}\n{resumed.stderr}")


def _folded_task(tmp_path: Path) -> Path:
    return write_scripted_task(tmp_path / "scripted")


@override_settings(RATCHET_FOLD_INTENTS=True)
def test_a_folded_run_hits_every_point_the_kills_name(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    hits = crash_point_hits(monkeypatch, (
        runtime.engine.propose, runtime.engine.execute, runtime.engine.settle, runtime.engine.complete,
        runtime.checkpoints.protocol, runtime.checkpoints.transaction,
        runtime.adapters.workspace.adapter))
    run_id = run_start(spec_path=_folded_task(tmp_path))
    assert run_advance(run_id=run_id).phase == "completed"

    assert dict(hits) == FOLDED_HITS
    assert all(nth <= FOLDED_HITS[point] for point, nth in KILLS)
    # One commit per write: the receipt of write N carries the intent of write N+1.
    events = list(TraceEvent.objects.filter(run_id=run_id).order_by("seq")
                  .values_list("event_type", flat=True))
    folded = [i for i, e in enumerate(events[:-1])
              if e == "write.executed" and events[i + 1] == "intent.proposed"]
    assert len(folded) == len(WORKSPACE_STEPS) - 1
    assert Run.objects.get(run_id=run_id).generation == len(WORKSPACE_STEPS) + 3


@override_settings(RATCHET_FOLD_INTENTS=True)
def test_a_twenty_write_run_commits_about_once_per_write(tmp_path: Path) -> None:
    steps = [{"target": f"data/f{n:03d}.txt", "content": f"step {n}\n"} for n in range(WRITES)]
    run_id = run_start(spec_path=write_scripted_task(tmp_path / "twenty", steps))
    per_write: list[int] = []
    with db_counting() as counts:
        mark = [0, 0]  # (transactions so far, cursor)

        def leased(**_: object) -> None:
            # The session's lease acquisition is the session's, not the first write's (DESIGN.md
            # section 4.5): one per session however many writes it makes.
            mark[0] = counts.transactions

        def on_step(step: StepReport) -> None:
            if step.cursor > mark[1]:
                per_write.append(counts.transactions - mark[0])
                mark[0], mark[1] = counts.transactions, step.cursor

        assert run_advance(run_id=run_id, on_step=on_step, reuse=leased).phase == "completed"

    assert len(per_write) == WRITES
    assert sum(per_write) / WRITES <= MAX_MEAN_MAIN_TRANSACTIONS_PER_WRITE, per_write
    assert max(per_write) <= MAX_MAIN_TRANSACTIONS_FOR_ONE_WRITE, per_write


@override_settings(RATCHET_FOLD_INTENTS=True)
def test_a_write_that_waits_for_an_approval_keeps_its_own_checkpoint(tmp_path: Path) -> None:
    steps = [{"target": "README.md", "content": "one\n"},
             {"target": "config/limits.toml", "content": "max_orders = 3\n", "risk": "high"}]
    run_id = run_start(spec_path=write_scripted_task(tmp_path / "approve", steps,
                                                     approval_risks=("high",)))
    report = run_advance(run_id=run_id)

    assert report.phase == "awaiting_approval"
    events = list(TraceEvent.objects.filter(run_id=run_id).order_by("seq")
                  .values_list("event_type", flat=True))
    executed = events.index("write.executed")
    # write 1 needs an approval: its intent is not folded into write 0's receipt commit
    assert events[executed + 1] != "intent.proposed"
    assert checkpoint_restore(run_id=run_id, scenario_fingerprint=Run.objects.get(
        run_id=run_id).scenario_fingerprint).state.pending.requires_approval


@pytest.mark.parametrize(("point", "nth"), KILLS, ids=[f"{p}:{n}" for p, n in KILLS])
def test_a_folded_run_writes_each_file_exactly_once_after_a_kill(
        tmp_path: Path, point: str, nth: int) -> None:
    killed = run_manage("run", str(_folded_task(tmp_path)), "--no-progress",
                        env=child_env(RATCHET_CRASH_AT=f"{point}:{nth}", RATCHET_LEASE_SECONDS=KILLED_LEASE_SECONDS,
                                      RATCHET_FOLD_INTENTS="1"))
    assert killed.returncode == KILLED, (killed.returncode, killed.stdout, killed.stderr)
    run_id = killed.stdout.splitlines()[0].removeprefix("run ")

    resumes = _resume_folded_until_done(run_id)

    _assert_workspace_written_exactly_once(run_id)
    _assert_recovered_cleanly(run_id, resumes)
    assert Counter(TraceEvent.objects.filter(run_id=run_id, event_type="write.executed")
                   .values_list("payload__idempotency_key", flat=True)).most_common(1)[0][1] == 1
