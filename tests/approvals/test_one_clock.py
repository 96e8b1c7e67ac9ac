"""Approval expiry is judged by the database clock, and approval validity has a configured
maximum, so a worker whose clock is 10 minutes slow cannot execute an expired approval (DESIGN.md
sections 4.7 and 6.2)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine

from runtime.core.checkpoint import StopReason
from runtime.database.clock import db_now
from runtime.decisions.approvals import approval_grant
from runtime.engine import run_advance
from runtime.errors import ApprovalTtlError
from tests.helpers.procs import run_manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_refuses_an_expired_approval_on_a_worker_with_a_slow_clock(story, monkeypatch):
    from runtime.adapters.workspace.adapter import WorkspaceAdapter

    # The check before execute must refuse on its own: the adapter's commit deadline would also
    # refuse a late write, so the test fails if execute is reached at all.
    executed: list[str] = []
    real_execute = WorkspaceAdapter.execute

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        executed.append(kwargs.get("idempotency_key", "?"))
        return real_execute(self, *args, **kwargs)

    monkeypatch.setattr(WorkspaceAdapter, "execute", spy)
    item = story.waiting()
    granted = approval_grant(run_id=story.run_id, approver="olivia",
                             environment_fingerprint=item.environment_fingerprint, ttl_seconds=1)
    wait_for(lambda: db_now() > granted.expires_at, timeout=30, what="the approval to expire")
    # This worker's clock runs 10 minutes slow: by its own clock the approval is still valid.
    with time_machine.travel(db_now() - timedelta(minutes=10), tick=True):
        report = run_advance(run_id=story.run_id, worker="worker-slow")
    assert report.phase == "awaiting_approval"
    assert report.stop_reason == StopReason.APPROVAL_EXPIRED.value
    assert not (story.workspace / "limits.toml").exists()
    assert story.effects_for(item.idempotency_key) == 0
    assert executed == []


def test_it_stamps_approvals_with_the_database_clock_on_a_control_plane_with_a_fast_clock(story):
    item = story.waiting()
    with time_machine.travel(db_now() + timedelta(days=30), tick=True):
        granted = approval_grant(run_id=story.run_id, approver="olivia",
                                 environment_fingerprint=item.environment_fingerprint, ttl_seconds=600)
    assert granted.expires_at - db_now() <= timedelta(seconds=600)


@pytest.mark.parametrize("ttl", [float("inf"), float("nan"), -1.0, 0.0, 3e11])
def test_it_refuses_an_approval_validity_that_is_not_finite_positive_and_bounded(story, ttl):
    item = story.waiting()
    with pytest.raises(ApprovalTtlError):
        approval_grant(run_id=story.run_id, approver="olivia",
                       environment_fingerprint=item.environment_fingerprint, ttl_seconds=ttl)
    assert story.waiting().approval_state == "none"


def test_the_command_line_gives_a_typed_error_for_a_bad_ttl(story, settings):
    item = story.waiting()
    for ttl in ("inf", "nan", "-1", "3e11"):
        result = run_manage("approvals", "approve", story.run_id, "--approver", "olivia",
                            "--fingerprint", item.environment_fingerprint, "--ttl", ttl)
        assert result.returncode != 0
        assert "Traceback" not in result.stderr, result.stderr
        assert "CommandError: approval validity" in result.stderr or "approval validity" in result.stderr, ttl
    assert story.waiting().approval_state == "none"
