"""Story: an operator's ``manage.py run`` is SIGKILLed while it creates the run.

The creator died before its first checkpoint was committed: the run row exists (with the clone
run creation prepared) but no checkpoint is, so nothing can resume it and nobody was told its id.
The operator lists it with ``runs --half-created`` and removes it with ``discard_run``, which
refuses any run that committed a checkpoint or whose lease is still live, and logs what it
removed. Each kill is a real SIGKILL at a named crash point of run creation.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models.functions import Now

from runtime.checkpoints.protocol import checkpoint_commit
from runtime.engine import run_advance, run_start
from runtime.errors import LeaseHeldError, RunDiscardRefusedError, RunNotFoundError
from runtime.models import Checkpoint, HighWaterMark, Run, TraceEvent
from runtime.ownership.leases import lease_acquire
from runtime.regression.sources import small_history_build
from runtime.workers.run_discard import run_discard, run_find_half_created
from tests.engine.support import write_replay_task, write_scripted_task
from tests.factories import make_state
from tests.helpers.procs import KILLED, child_env, run_manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

CREATION_POINTS = ["checkpoint.after_ledger_rows", "checkpoint.after_append"]
"""Their first hit is inside run creation, before generation 1 is committed. With the high-water
mark in its own store (DESIGN.md section 4.2) the main transaction is the commit point, so
``checkpoint.before_hwm_cas`` and ``checkpoint.after_hwm_cas`` are past it: that run is
committed, not half-created, whether its mark moved or not (section 4.3)."""


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("history") / "source"
    small_history_build(path)
    return path


def _killed_creator(task: Path, *, point: str, lease_seconds: str) -> Run:
    killed = run_manage("run", str(task), "--no-progress",
                        env=child_env(RATCHET_CRASH_AT=f"{point}:1", RATCHET_LEASE_SECONDS=lease_seconds))
    assert killed.returncode == KILLED, (killed.returncode, killed.stderr)
    assert killed.stdout == ""  # the operator was never told the run id
    (run,) = Run.objects.all()
    return run


def _lease_expired(run_id: str) -> bool:
    return Run.objects.filter(run_id=run_id, lease_expires_at__lte=Now()).exists()


def _manage(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize("point", CREATION_POINTS)
def test_it_lists_and_discards_a_run_killed_while_it_was_created(
    tmp_path: Path, source: Path, point: str, caplog: pytest.LogCaptureFixture
) -> None:
    task = write_replay_task(tmp_path / "replay", source)
    run = _killed_creator(task, point=point, lease_seconds="1")
    target = Path(run.spec["target"])
    assert target.is_dir() and target.name == run.run_id

    listed = _manage("runs", "--half-created")
    assert run.run_id in listed
    wait_for(lambda: _lease_expired(run.run_id), timeout=10, what="the killed creator's lease to expire")

    with caplog.at_level(logging.WARNING, logger="runtime.workers.run_discard"):
        said = _manage("discard_run", run.run_id, "--operator", "olivia")

    assert f"run {run.run_id} discarded by olivia" in said
    assert said.strip() in caplog.text
    assert not Run.objects.filter(run_id=run.run_id).exists()
    assert not Checkpoint.objects.filter(run_id=run.run_id).exists()
    assert not TraceEvent.objects.filter(run_id=run.run_id).exists()
    assert not HighWaterMark.objects.filter(run_id=run.run_id).exists()
    assert not target.exists()
    assert run.run_id not in _manage("runs", "--half-created")

    again = run_manage("run", str(task), "--no-progress")
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize(("point", "mark"), [("checkpoint.before_hwm_cas", 0), ("checkpoint.after_hwm_cas", 1)])
def test_a_creator_killed_after_the_commit_point_left_a_run_that_resumes(
    tmp_path: Path, source: Path, point: str, mark: int
) -> None:
    task = write_replay_task(tmp_path / "replay", source)
    run = _killed_creator(task, point=point, lease_seconds="1")
    assert HighWaterMark.objects.using("hwm").get(run_id=run.run_id).generation == mark
    assert (run.generation, run.state_version) == (1, 1)

    assert run.run_id not in _manage("runs", "--half-created")
    with pytest.raises(RunDiscardRefusedError, match="the run committed a checkpoint"):
        run_discard(run_id=run.run_id, operator="olivia")

    wait_for(lambda: _lease_expired(run.run_id), timeout=10, what="the killed creator's lease to expire")
    resumed = run_manage("resume", run.run_id, "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert Run.objects.get(run_id=run.run_id).phase == "completed"


def test_it_refuses_while_the_creator_may_still_be_alive(tmp_path: Path, source: Path) -> None:
    run = _killed_creator(write_replay_task(tmp_path / "replay", source), point="checkpoint.after_append",
                          lease_seconds="60")
    orphans = Checkpoint.objects.filter(run_id=run.run_id).count()  # uncommitted rows, if any
    (half,) = run_find_half_created()
    assert (half.run_id, half.lease_live, half.hwm, half.orphan_checkpoints) == (run.run_id, True, "generation 0",
                                                                              orphans)

    with pytest.raises(LeaseHeldError):
        run_discard(run_id=run.run_id, operator="olivia")
    with pytest.raises(CommandError):
        _manage("discard_run", run.run_id, "--operator", "olivia")

    assert Run.objects.filter(run_id=run.run_id).exists()
    assert Checkpoint.objects.filter(run_id=run.run_id).count() == orphans
    assert Path(run.spec["target"]).is_dir()


def test_it_refuses_a_run_that_committed_a_checkpoint(tmp_path: Path) -> None:
    fresh = run_start(spec_path=write_scripted_task(tmp_path / "fresh"))  # generation 1, lease released
    done = run_start(spec_path=write_scripted_task(tmp_path / "done"))
    assert run_advance(run_id=done).phase == "completed"

    for run_id in (fresh, done):
        with pytest.raises(RunDiscardRefusedError, match="committed a checkpoint"):
            run_discard(run_id=run_id, operator="olivia")
        assert Run.objects.filter(run_id=run_id).exists()
    assert run_find_half_created() == []
    with pytest.raises(RunNotFoundError):
        run_discard(run_id="no-such-run", operator="olivia")


def test_a_creator_that_outlives_its_lease_cannot_bring_the_run_back() -> None:
    """The creator stalled after its first transaction (row + lease, no HWM row yet) past its
    lease: the operator discards the run, then the creator wakes up and tries to commit."""
    state = make_state()
    run_id = state.identity.run_id
    ident = state.identity
    Run(run_id=run_id, tenant_id=ident.tenant_id, task_id=ident.task_id, task_version=ident.task_version,
        policy_id=ident.policy_id, policy_version=ident.policy_version,
        environment_instance_id=state.environment.instance_id, scenario_fingerprint=ident.scenario_fingerprint,
        phase=state.phase.value).save(force_insert=True)
    lease = lease_acquire(run_id=run_id, worker="stalled-creator", ttl_seconds=0.3)
    (half,) = run_find_half_created()
    assert half.hwm == "missing"
    wait_for(lambda: _lease_expired(run_id), timeout=10, what="the stalled creator's lease to expire")

    report = run_discard(run_id=run_id, operator="olivia")

    assert (report.hwm_removed, report.trace_events, report.orphan_checkpoints) == (False, 1, 0)
    with pytest.raises(RunNotFoundError):
        checkpoint_commit(lease=lease, state=state, expected_generation=0)
    assert not Run.objects.filter(run_id=run_id).exists()
    assert not Checkpoint.objects.filter(run_id=run_id).exists()
    assert run_find_half_created() == []
