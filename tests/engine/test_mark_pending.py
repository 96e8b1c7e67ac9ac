"""Story: a commit that reached its commit point but not its high-water mark says so, and
nothing that follows treats it as lost (DESIGN.md section 4.3, "The mark in its own database").

The mark's compare-and-set is made to fail once, as an unreachable mark store would: run
creation still assigns the run its combination and frees its lease, a service's last commit
under ``run_session`` reports the pending mark (not a lease it thinks it lost), and the next
resume completes the mark and finishes the run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.checkpoints import transaction as commit_transaction
from runtime.checkpoints.protocol import checkpoint_hwm
from runtime.checkpoints.session import run_session, session_commit
from runtime.core.checkpoint import Phase, StopReason
from runtime.engine import run_advance, run_start
from runtime.errors import HighWaterMarkMissingError, MarkPendingError
from runtime.models import CombinationRun, Run
from tests.engine.support import write_scripted_task

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

ONE_WRITE = [{"target": "result.txt", "content": "written once\n"}]


def _task(directory: Path) -> Path:
    return write_scripted_task(directory, ONE_WRITE, files={"result.txt": "written once\n"})


def _mark_fails_once(monkeypatch: pytest.MonkeyPatch) -> None:
    real = commit_transaction.hwm_advance
    calls = []

    def once(**kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise HighWaterMarkMissingError("the high-water mark store is unavailable (test)")
        return real(**kwargs)

    monkeypatch.setattr(commit_transaction, "hwm_advance", once)


def test_a_run_created_while_its_mark_store_was_away_is_pinned_freed_and_resumes(monkeypatch, tmp_path: Path):
    _mark_fails_once(monkeypatch)

    with pytest.raises(MarkPendingError):
        run_start(spec_path=_task(tmp_path / "created"))

    (run,) = Run.objects.all()
    assert (run.generation, run.owner_worker) == (1, "")
    assert CombinationRun.objects.filter(run_id=run.run_id).exists()
    report = run_advance(run_id=run.run_id, worker="worker-b")
    assert report.phase == "completed"
    assert checkpoint_hwm(run_id=run.run_id).generation == report.generation


def test_a_last_commit_under_run_session_reports_the_pending_mark_not_a_lost_lease(monkeypatch, tmp_path: Path):
    run_id = run_start(spec_path=_task(tmp_path / "service"))
    _mark_fails_once(monkeypatch)

    with pytest.raises(MarkPendingError), run_session(run_id=run_id, worker="operator:olivia") as session:
        session.state.phase = Phase.CANCELLED
        session.state.stop_reason = StopReason.CANCELLED
        session_commit(session, ("run.cancelled", {"by": "olivia"}))

    run = Run.objects.get(run_id=run_id)
    assert (run.phase, run.generation, run.owner_worker) == ("cancelled", 2, "")
    assert checkpoint_hwm(run_id=run_id).generation == 2


def test_a_session_whose_mark_is_pending_commits_nothing_more(monkeypatch, tmp_path: Path):
    run_id = run_start(spec_path=_task(tmp_path / "more"))
    _mark_fails_once(monkeypatch)

    with run_session(run_id=run_id, worker="operator:olivia") as session:
        with pytest.raises(MarkPendingError):
            session_commit(session, ("note", {"n": 1}))
        with pytest.raises(MarkPendingError, match="nothing more is committed"):
            session_commit(session, ("note", {"n": 2}))

    assert Run.objects.get(run_id=run_id).generation == 2
    assert checkpoint_hwm(run_id=run_id).generation == 2
