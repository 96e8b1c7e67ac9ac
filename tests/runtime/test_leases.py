"""Leases: two workers (worker-a, worker-b) share runs; the database clock decides expiry.

DESIGN.md section 4, Ownership: acquire, renew, release, take over after expiry; the lease version
is the fencing token; a worker that lost its lease gets a typed error and stops.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import time_machine

from runtime.errors import LeaseHeldError, LeaseLostError, RunNotFoundError
from runtime.models import Run, TraceEvent
from runtime.ownership.leases import Lease, lease_acquire, lease_check, lease_release, lease_renew

pytestmark = pytest.mark.django_db


def test_it_gives_worker_a_the_lease_of_a_new_run(start_run):
    state, first = start_run(worker="worker-a")

    row = Run.objects.get(run_id=state.identity.run_id)
    assert row.owner_worker == "worker-a"
    assert first.lease.lease_version == row.lease_version == 1
    assert first.lease.expires_at == row.lease_expires_at


def test_it_refuses_worker_b_while_worker_a_holds_the_lease(start_run):
    state, _ = start_run(worker="worker-a")

    with pytest.raises(LeaseHeldError) as caught:
        lease_acquire(run_id=state.identity.run_id, worker="worker-b", ttl_seconds=30)

    assert caught.value.retryable
    assert caught.value.context["holder"] == "worker-a"
    assert Run.objects.get(run_id=state.identity.run_id).owner_worker == "worker-a"


def test_it_bumps_the_fencing_token_when_a_restarted_worker_retakes_its_own_lease(start_run):
    state, first = start_run(worker="worker-a")

    again = lease_acquire(run_id=state.identity.run_id, worker="worker-a", ttl_seconds=30)

    assert again.lease_version == first.lease.lease_version + 1
    with pytest.raises(LeaseLostError):
        lease_check(lease=first.lease)  # the previous incarnation is fenced off
    lease_check(lease=again)


def test_it_hands_an_expired_lease_to_worker_b(start_run):
    state, first = start_run(worker="worker-a", ttl_seconds=0.5)
    time.sleep(0.7)

    taken = lease_acquire(run_id=state.identity.run_id, worker="worker-b", ttl_seconds=30)

    assert taken.worker == "worker-b"
    assert taken.lease_version == first.lease.lease_version + 1
    acquired = TraceEvent.objects.filter(
        run_id=state.identity.run_id, event_type="lease.acquired"
    ).last()
    assert acquired.payload["previous_owner"] == "worker-a"
    with pytest.raises(LeaseLostError, match="taken over"):
        lease_check(lease=first.lease)


def test_it_judges_expiry_by_the_database_clock_not_the_workers(start_run):
    state, first = start_run(worker="worker-a", ttl_seconds=30)

    # worker-b's own clock runs an hour fast: the lease is still held by the database clock.
    with time_machine.travel(first.lease.expires_at + timedelta(hours=1), tick=True):
        with pytest.raises(LeaseHeldError):
            lease_acquire(run_id=state.identity.run_id, worker="worker-b", ttl_seconds=30)
        lease_check(lease=first.lease)


def test_it_renews_a_current_lease_without_changing_the_token(start_run):
    _, first = start_run(worker="worker-a", ttl_seconds=5)

    renewed = lease_renew(lease=first.lease, ttl_seconds=60)

    assert renewed.lease_version == first.lease.lease_version
    assert renewed.expires_at > first.lease.expires_at + timedelta(seconds=50)


def test_it_refuses_to_renew_an_expired_lease(start_run):
    _, first = start_run(worker="worker-a", ttl_seconds=0.5)
    time.sleep(0.7)

    with pytest.raises(LeaseLostError, match="expired"):
        lease_renew(lease=first.lease, ttl_seconds=30)


def test_it_refuses_to_renew_a_lease_that_was_taken_over(start_run):
    state, first = start_run(worker="worker-a", ttl_seconds=0.5)
    time.sleep(0.7)
    lease_acquire(run_id=state.identity.run_id, worker="worker-b", ttl_seconds=30)

    with pytest.raises(LeaseLostError, match="taken over"):
        lease_renew(lease=first.lease, ttl_seconds=30)


def test_it_lets_worker_b_take_over_at_once_after_a_release(start_run):
    state, first = start_run(worker="worker-a")

    lease_release(lease=first.lease)
    taken = lease_acquire(run_id=state.identity.run_id, worker="worker-b", ttl_seconds=30)

    assert taken.lease_version == first.lease.lease_version + 1
    assert TraceEvent.objects.filter(
        run_id=state.identity.run_id, event_type="lease.released"
    ).exists()


def test_it_refuses_a_release_by_a_fenced_worker(start_run):
    state, first = start_run(worker="worker-a")
    lease_acquire(run_id=state.identity.run_id, worker="worker-a", ttl_seconds=30)  # restarted

    with pytest.raises(LeaseLostError):
        lease_release(lease=first.lease)
    assert Run.objects.get(run_id=state.identity.run_id).owner_worker == "worker-a"


def test_it_fails_the_check_once_the_lease_expires(start_run):
    _, first = start_run(worker="worker-a", ttl_seconds=0.5)
    lease_check(lease=first.lease)
    time.sleep(0.7)

    with pytest.raises(LeaseLostError, match="expired"):
        lease_check(lease=first.lease)


def test_it_reports_an_unknown_run():
    with pytest.raises(RunNotFoundError):
        lease_acquire(run_id="no-such-run", worker="worker-a", ttl_seconds=30)
    ghost = Lease(
        run_id="no-such-run", worker="worker-a", lease_version=1, state_version=1, expires_at=None
    )  # type: ignore[arg-type]
    with pytest.raises(LeaseLostError):
        lease_check(lease=ghost)


@pytest.mark.parametrize("ttl", [0, -1.0])
def test_it_refuses_a_non_positive_ttl(start_run, ttl):
    state, _ = start_run()

    with pytest.raises(ValueError):
        lease_acquire(run_id=state.identity.run_id, worker="worker-a", ttl_seconds=ttl)
