"""The commit protocol: validate -> append g+1 -> fence + HWM CAS g -> g+1 -> commit.

DESIGN.md section 4 (Freshness, Ownership) and section 7 ("HWM advanced before validation").
"""

from __future__ import annotations

import time

import pytest

from runtime.checkpoints.protocol import (
    checkpoint_commit,
    checkpoint_hwm,
    checkpoint_restore,
    run_create,
)
from runtime.core.canonical import digest_bytes
from runtime.core.checkpoint import Phase
from runtime.core.envelope import envelope_digest, seal
from runtime.core.signing import TrustRoot
from runtime.errors import (
    CanonicalizationError,
    CheckpointInvariantError,
    HighWaterMarkMissingError,
    IdentityMismatchError,
    LeaseLostError,
    RunExistsError,
    StaleGenerationError,
)
from runtime.keys import keyring_for
from runtime.models import Checkpoint, HighWaterMark, Run, TraceEvent
from runtime.ownership.leases import lease_acquire
from tests.factories import make_state, scenario_fingerprint
from tests.runtime.conftest import advance

pytestmark = pytest.mark.django_db


def _snapshot(run_id: str) -> tuple:
    run = Run.objects.get(run_id=run_id)
    return (
        checkpoint_hwm(run_id=run_id),
        run.state_version,
        run.generation,
        Checkpoint.objects.filter(run_id=run_id).count(),
        TraceEvent.objects.filter(run_id=run_id).count(),
    )


def test_it_creates_a_run_at_generation_one(start_run):
    state, first = start_run(worker="worker-a")
    run_id = state.identity.run_id

    assert first.generation == 1
    hwm = HighWaterMark.objects.get(run_id=run_id)
    assert (hwm.generation, hwm.checkpoint_digest) == (1, first.digest)
    assert (hwm.task_id, hwm.environment_instance_id) == ("task-1", "env-1")
    row = Checkpoint.objects.get(run_id=run_id)
    assert digest_bytes(bytes(row.envelope)) == first.digest
    run = Run.objects.get(run_id=run_id)
    assert (run.state_version, run.generation, run.scenario_fingerprint) == (
        1,
        1,
        scenario_fingerprint(),
    )
    assert first.lease.state_version == 1


def test_it_advances_the_hwm_state_version_and_trace_on_each_commit(start_run):
    state, first = start_run()
    run_id = state.identity.run_id

    second = checkpoint_commit(
        lease=first.lease,
        state=advance(state),
        expected_generation=1,
        events=[("step.observed", {"cursor": 1})],
    )
    third = checkpoint_commit(
        lease=second.lease, state=advance(advance(state)), expected_generation=2
    )

    assert (second.generation, third.generation) == (2, 3)
    assert third.lease.state_version == 3
    assert checkpoint_hwm(run_id=run_id).generation == 3
    assert (
        checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint()).state.cursor
        == 2
    )
    types = list(TraceEvent.objects.filter(run_id=run_id).values_list("event_type", flat=True))
    assert types == [
        "lease.acquired",
        "checkpoint.committed",
        "step.observed",
        "checkpoint.committed",
        "checkpoint.committed",
    ]
    committed = TraceEvent.objects.filter(run_id=run_id, event_type="checkpoint.committed").last()
    assert committed.payload["generation"] == 3 and committed.payload["digest"] == third.digest


def test_it_rejects_a_stale_expected_generation_and_advances_nothing(start_run):
    state, first = start_run()
    run_id = state.identity.run_id
    second = checkpoint_commit(lease=first.lease, state=advance(state), expected_generation=1)
    before = _snapshot(run_id)

    with pytest.raises(StaleGenerationError) as caught:
        checkpoint_commit(lease=second.lease, state=advance(advance(state)), expected_generation=1)

    assert caught.value.context["hwm_generation"] == 2
    # The fence names the generation the caller extends (DESIGN.md section 4.3): nothing of the
    # commit is written, in either database.
    assert _snapshot(run_id) == before
    assert checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint()).generation == 2


def test_it_rejects_a_commit_made_with_a_stale_state_version(start_run):
    state, first = start_run()
    checkpoint_commit(lease=first.lease, state=advance(state), expected_generation=1)

    # Reusing the lease from before the last commit: same owner and token, old state_version.
    with pytest.raises(LeaseLostError, match="state version"):
        checkpoint_commit(lease=first.lease, state=advance(state), expected_generation=2)


def test_a_worker_that_lost_its_lease_gets_a_typed_error_on_its_next_commit(start_run):
    state, first = start_run(worker="worker-a", ttl_seconds=0.5)
    run_id = state.identity.run_id
    time.sleep(0.7)
    taken = lease_acquire(run_id=run_id, worker="worker-b", ttl_seconds=30)

    with pytest.raises(LeaseLostError, match="taken over") as caught:
        checkpoint_commit(
            lease=first.lease,
            state=advance(state, planner_state={"by": "a"}),
            expected_generation=1,
        )

    assert caught.value.context == {"run_id": run_id, "worker": "worker-a", "lease_version": 1}
    assert checkpoint_hwm(run_id=run_id).generation == 1
    done = checkpoint_commit(
        lease=taken, state=advance(state, planner_state={"by": "b"}), expected_generation=1
    )
    restored = checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint())
    assert (done.generation, restored.state.planner_state) == (2, {"by": "b"})


def test_an_invalid_state_never_advances_the_hwm(start_run):
    state, first = start_run()
    run_id = state.identity.run_id
    before = _snapshot(run_id)

    with pytest.raises(CheckpointInvariantError):
        checkpoint_commit(
            lease=first.lease, state=advance(state, phase=Phase.PENDING), expected_generation=1
        )

    assert _snapshot(run_id) == before  # not even a checkpoint row was written
    restored = checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint())
    assert restored.generation == 1 and restored.state == state


def test_an_unserialisable_value_never_advances_the_hwm(start_run):
    state, first = start_run()
    run_id = state.identity.run_id
    before = _snapshot(run_id)

    with pytest.raises(CanonicalizationError):
        checkpoint_commit(
            lease=first.lease,
            state=advance(state, planner_state={"x": float("nan")}),
            expected_generation=1,
        )
    with pytest.raises(CanonicalizationError):
        checkpoint_commit(
            lease=first.lease,
            state=advance(state),
            expected_generation=1,
            events=[("step.observed", {"tags": {"a", "b"}})],
        )

    assert _snapshot(run_id) == before
    assert (
        checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint()).generation
        == 1
    )


def test_it_refuses_a_state_whose_identity_changed_mid_run(start_run):
    state, first = start_run()
    changed = make_state(run_id=state.identity.run_id, task_version="2")
    before = _snapshot(state.identity.run_id)

    with pytest.raises(IdentityMismatchError, match="task_version"):
        checkpoint_commit(lease=first.lease, state=changed, expected_generation=1)
    other = make_state()
    with pytest.raises(IdentityMismatchError):
        checkpoint_commit(lease=first.lease, state=other, expected_generation=1)

    after = _snapshot(state.identity.run_id)
    assert after[:3] + after[4:] == before[:3] + before[4:]  # mark, versions, mirror, trace
    # Rows written before the fence refused are orphans restore never loads (section 4.3).
    assert checkpoint_restore(run_id=state.identity.run_id,
                              scenario_fingerprint=scenario_fingerprint()).generation == 1


def test_it_fails_closed_when_the_hwm_row_vanished_before_a_commit(start_run):
    state, first = start_run()
    run_id = state.identity.run_id
    HighWaterMark.objects.filter(run_id=run_id).delete()

    with pytest.raises(HighWaterMarkMissingError):
        checkpoint_commit(lease=first.lease, state=advance(state), expected_generation=1)

    # The main transaction, the commit point, committed generation 2 before the mark's
    # compare-and-set found no row (DESIGN.md section 4.3); nothing loads it without a mark.
    run = Run.objects.get(run_id=run_id)
    assert (run.state_version, run.generation) == (2, 2)
    with pytest.raises(HighWaterMarkMissingError):
        checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint())


def test_it_refuses_to_create_the_same_run_twice(start_run):
    state, _ = start_run()

    with pytest.raises(RunExistsError):
        run_create(state=state, worker="worker-b", ttl_seconds=30)
    assert Run.objects.filter(run_id=state.identity.run_id).count() == 1


def test_it_writes_nothing_when_the_first_state_is_invalid():
    state = make_state(phase=Phase.PENDING)

    with pytest.raises(CheckpointInvariantError):
        run_create(state=state, worker="worker-a", ttl_seconds=30)

    assert not Run.objects.filter(run_id=state.identity.run_id).exists()
    assert not HighWaterMark.objects.filter(run_id=state.identity.run_id).exists()


def test_it_ignores_an_orphan_of_the_next_generation(start_run):
    """A fenced commit leaves nothing behind (one transaction); an orphan g+1 is never restored."""
    state, first = start_run(worker="worker-a")
    run_id = state.identity.run_id
    refused = advance(state, planner_state={"by": "stale"})
    lease_acquire(run_id=run_id, worker="worker-a", ttl_seconds=30)  # a restart fences `first`
    with pytest.raises(LeaseLostError):
        checkpoint_commit(lease=first.lease, state=refused, expected_generation=1)

    assert Checkpoint.objects.filter(run_id=run_id, generation=2).count() == 0
    orphan, _ = seal(refused, generation=2, keyring=keyring_for(TrustRoot.CHECKPOINT))
    Checkpoint.objects.create(run_id=run_id, generation=2, envelope=orphan, digest=envelope_digest(orphan),
                              key_id="k", schema_version=3, lease_version=1)
    restored = checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario_fingerprint())
    assert (restored.generation, restored.state.planner_state) == (1, {})
