"""Story: the adapter call times out; the outcome is unknown and is settled by key (DESIGN.md section 5.3).

A real timeout: the git adapter runs a ``git`` whose ``update-ref`` (the commit point) hangs
past the adapter's subprocess timeout (shortened here to 1.5 s) and is killed. The engine cannot
know whether the write happened, so it records ``write.outcome_unknown`` and, on the next step,
queries the adapter by key before anything else -- never a blind retry:

* the hang came *after* the ref update: the commit exists, it is reconciled, one effect;
* the hang came *before* it: no receipt, the pre-state still holds, the write is executed again
  with the same key, one effect;
* every attempt hangs: after three unknown outcomes with no receipt the run freezes
  (``outcome_unknown``) for a human, with no effect.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import runtime.adapters.git.process as git_process
from runtime.engine import run_advance, run_start
from runtime.engine.execute import MAX_UNKNOWN_OUTCOME_ATTEMPTS
from tests.engine.support import (
    SOURCE_COMMITS,
    hangs,
    install_hanging_git,
    key_effects,
    restore,
    run_target,
    trace_events,
    trace_types,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hanging_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def install(*, limit: int, after_update: bool) -> Path:
        directory = install_hanging_git(tmp_path / "bin", limit=limit, after_update=after_update)
        monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setattr(git_process, "GIT_TIMEOUT_SECONDS", 1.5)
        return directory

    return install


def _started(replay_task: Path) -> str:
    run_id = run_start(spec_path=replay_task)
    assert run_advance(run_id=run_id, max_steps=1).phase == "pending"
    return run_id


def test_it_reconciles_a_write_that_landed_before_the_timeout(replay_task, hanging_git) -> None:
    run_id = _started(replay_task)
    wrapper = hanging_git(limit=1, after_update=True)
    key = restore(run_id).state.pending.idempotency_key

    timed_out = run_advance(run_id=run_id, max_steps=1)

    assert hangs(wrapper) == 1
    assert (timed_out.phase, timed_out.events) == ("pending", ["write.outcome_unknown"])
    assert restore(run_id).state.pending.attempts == 1
    assert key_effects(run_target(run_id)) == {key: 1}  # it did land

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("completed", "verified")
    types = trace_types(run_id)
    assert types.index("write.outcome_unknown") < types.index("write.reconciled")
    assert trace_events(run_id, "write.reconciled")[0]["idempotency_key"] == key
    effects = key_effects(run_target(run_id))
    assert len(effects) == SOURCE_COMMITS and set(effects.values()) == {1}


def test_it_executes_again_with_the_same_key_when_nothing_landed(replay_task, hanging_git) -> None:
    run_id = _started(replay_task)
    wrapper = hanging_git(limit=1, after_update=False)
    key = restore(run_id).state.pending.idempotency_key

    report = run_advance(run_id=run_id)

    assert hangs(wrapper) == 1
    assert (report.phase, report.stop_reason) == ("completed", "verified")
    unknown = trace_events(run_id, "write.outcome_unknown")
    assert [(e["idempotency_key"], e["attempts"]) for e in unknown] == [(key, 1)]
    assert trace_events(run_id, "write.executed")[0]["idempotency_key"] == key
    assert len(trace_events(run_id, "intent.proposed")) == SOURCE_COMMITS  # no new key, no re-plan
    effects = key_effects(run_target(run_id))
    assert effects[key] == 1 and set(effects.values()) == {1}


def test_it_freezes_after_repeated_timeouts_without_a_receipt(replay_task, hanging_git) -> None:
    run_id = _started(replay_task)
    wrapper = hanging_git(limit=MAX_UNKNOWN_OUTCOME_ATTEMPTS, after_update=False)
    pending = restore(run_id).state.pending

    report = run_advance(run_id=run_id)

    assert hangs(wrapper) == MAX_UNKNOWN_OUTCOME_ATTEMPTS
    assert (report.phase, report.stop_reason) == ("needs_review", "outcome_unknown")
    assert key_effects(run_target(run_id)) == {}
    state = restore(run_id).state
    assert state.pending.idempotency_key == pending.idempotency_key
    assert state.pending.intent_digest == pending.intent_digest
    assert len(trace_events(run_id, "write.outcome_unknown")) == MAX_UNKNOWN_OUTCOME_ATTEMPTS - 1
