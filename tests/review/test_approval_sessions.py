"""Approve on an expired approval is a refresh (it needs the refresh permission), and two sessions
of one approver or reviewer racing on a run get a message that says what happened: the lease of
a person's call is held under a name of that call alone, so a second tab is refused naming the
holder, and a session whose lease was taken over after it expired is told another session
changed the run (DESIGN.md section 6.6)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

import runtime.decisions.approvals
from review.scope import scope_set
from runtime.checkpoints.session import person_worker_id
from runtime.models import ReviewCase, Run
from runtime.ownership.leases import lease_acquire, lease_release
from tests.review.conftest import PASSWORD
from tests.review.stories import (
    conflict_run,
    events,
    expired_approval_run,
    hidden,
    messages,
    phase,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def expired(tmp_path, ratchet_keys, enqueued) -> str:  # type: ignore[no-untyped-def]
    return expired_approval_run(tmp_path)


def _approver_without_refresh(django_user_model) -> Client:  # type: ignore[no-untyped-def]
    user = django_user_model.objects.create_user(username="approve-only", password="x")
    user.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="review", codename__in=["view_runs", "approve_action"]))
    scope_set(user=user, all_tenants=True)
    client = Client()
    client.force_login(user)
    return client


def test_it_refuses_approve_on_an_expired_approval_without_the_refresh_permission(
    expired, personas, django_user_model, client_for
) -> None:
    page = client_for("operator").get(reverse("review:approvals")).content.decode()
    response = _approver_without_refresh(django_user_model).post(
        reverse("review:approve", args=[expired]),
        {"environment_fingerprint": hidden(page, "environment_fingerprint")},
        follow=True,
    )
    assert "replacing it is a refresh" in messages(response.content.decode())[0]
    assert events(expired, "approval.refreshed") == []
    assert phase(expired) == "awaiting_approval"


def test_it_refuses_the_second_session_of_the_same_approver_naming_the_first(
    expired, client_for
) -> None:
    page = client_for("operator").get(reverse("review:approvals")).content.decode()
    other_tab = lease_acquire(run_id=expired, worker=person_worker_id(role="approver", person="operator"),
                              ttl_seconds=30)
    try:
        response = client_for("operator").post(
            reverse("review:refresh", args=[expired]),
            {"environment_fingerprint": hidden(page, "environment_fingerprint")},
            follow=True,
        )
    finally:
        lease_release(lease=other_tab)
    text = messages(response.content.decode())[0]
    assert f"Lease holder {other_tab.worker} is changing this run" in text
    assert "you in another tab or window" in text and "nothing was changed" in text
    assert events(expired, "approval.refreshed") == []


def test_it_tells_a_session_whose_lease_was_taken_over_what_happened(
    expired, client_for, monkeypatch
) -> None:
    page = client_for("operator").get(reverse("review:approvals")).content.decode()
    real_grant = runtime.decisions.approvals._grant

    def lease_taken_over(ctx, *args, **kwargs):  # type: ignore[no-untyped-def]
        # This session's lease runs out mid-grant and a worker takes the run: this session is
        # fenced off at its commit.
        Run.objects.filter(run_id=ctx.run_id).update(lease_expires_at=datetime(2000, 1, 1, tzinfo=UTC))
        lease_acquire(run_id=ctx.run_id, worker="worker-2", ttl_seconds=30)
        return real_grant(ctx, *args, **kwargs)

    monkeypatch.setattr(runtime.decisions.approvals, "_grant", lease_taken_over)
    response = client_for("operator").post(
        reverse("review:refresh", args=[expired]),
        {"environment_fingerprint": hidden(page, "environment_fingerprint")},
        follow=True,
    )
    text = messages(response.content.decode())[0]
    assert "Another session changed this run at the same moment" in text
    assert events(expired, "approval.refreshed") == []


def test_it_tells_a_reviewer_whose_other_session_holds_the_run(
    tmp_path, ratchet_keys, enqueued, client_for
) -> None:
    conflict = conflict_run(tmp_path)
    client = client_for("reviewer")
    page = client.get(reverse("review:case", args=[conflict.case_id])).content.decode()
    other_tab = lease_acquire(run_id=conflict.run_id, worker="reviewer:reviewer:other-tab",
                              ttl_seconds=30)
    try:
        response = client.post(
            reverse("review:decide", args=[conflict.case_id]),
            {"binding": hidden(page, "binding"), "decision": "abort", "password": PASSWORD},
            follow=True,
        )
    finally:
        lease_release(lease=other_tab)
    text = messages(response.content.decode())[0]
    assert "you in another tab or window" in text and "nothing was applied" in text
    assert ReviewCase.objects.get(case_id=conflict.case_id).status == "open"
