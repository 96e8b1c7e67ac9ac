"""One Approve click restores the run's checkpoint once, and who may replace an approval is
decided on that restored state (DESIGN.md section 6.6): the service's ``may_refresh``, not a
second read in the view.

Restores are counted with a spy that calls the real ``checkpoint_restore`` (every restore, the
session's and ``checkpoint_verify``'s, goes through it), so the work is done, not mocked.
"""

from __future__ import annotations

import sys

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from review.scope import scope_set
from runtime.checkpoints import protocol
from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.errors import ApprovalRefusedError
from tests.review.stories import approval_run, events, expired_approval_run, messages, phase

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def restores(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run ids of every checkpoint restore from now on (the real restore still runs)."""
    calls: list[str] = []
    real = protocol.checkpoint_restore

    def counting_restore(**kwargs):  # type: ignore[no-untyped-def]
        calls.append(kwargs["run_id"])
        return real(**kwargs)

    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in ("runtime", "review") and vars(module).get("checkpoint_restore") is real:
            monkeypatch.setattr(module, "checkpoint_restore", counting_restore)
    return calls


def _user(django_user_model, name: str, *codenames: str) -> Client:  # type: ignore[no-untyped-def]
    user = django_user_model.objects.create_user(username=name, password="x")
    user.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="review", codename__in=["view_runs", *codenames]))
    scope_set(user=user, all_tenants=True)
    client = Client()
    client.force_login(user)
    return client


def _fingerprint(run_id: str) -> str:
    [waiting] = approvals_waiting(run_ids=[run_id])
    return waiting.environment_fingerprint


@pytest.mark.parametrize(("story", "recorded"), [
    (approval_run, "approval.granted"),
    # over expired evidence: a refresh, which the operator may do
    (expired_approval_run, "approval.refreshed"),
], ids=["fresh", "expired"])
def test_it_restores_the_checkpoint_once_per_approve_click(
    tmp_path, ratchet_keys, enqueued, client_for, restores, story, recorded
) -> None:
    run_id = story(tmp_path)
    fingerprint = _fingerprint(run_id)
    restores.clear()

    response = client_for("operator").post(reverse("review:approve", args=[run_id]),
                                           {"environment_fingerprint": fingerprint})

    assert response.status_code == 303
    assert restores == [run_id]
    assert len(events(run_id, recorded)) == 1
    assert phase(run_id) == "pending"


def test_it_restores_once_when_approve_over_an_expired_approval_is_refused(
    tmp_path, ratchet_keys, enqueued, personas, django_user_model, restores
) -> None:
    run_id = expired_approval_run(tmp_path)
    fingerprint = _fingerprint(run_id)
    client = _user(django_user_model, "approve-only", "approve_action")
    restores.clear()

    response = client.post(reverse("review:approve", args=[run_id]),
                           {"environment_fingerprint": fingerprint})

    assert restores == [run_id]
    assert response.status_code == 303
    assert "replacing it is a refresh" in messages(client.get(response["Location"]).content.decode())[0]
    [refused] = events(run_id, "approval.refused")
    assert "replacing it is a refresh" in refused["reason"]
    assert events(run_id, "approval.refreshed") == []
    assert phase(run_id) == "awaiting_approval"


def test_it_refuses_approve_to_a_user_who_may_only_refresh(
    tmp_path, ratchet_keys, enqueued, personas, django_user_model, restores
) -> None:
    run_id = approval_run(tmp_path)
    fingerprint = _fingerprint(run_id)
    client = _user(django_user_model, "refresh-only", "refresh_approval")
    restores.clear()

    response = client.post(reverse("review:approve", args=[run_id]),
                           {"environment_fingerprint": fingerprint})

    assert response.status_code == 403
    assert restores == [], "refused before the run is read"
    assert events(run_id, "approval.granted") == []
    assert phase(run_id) == "awaiting_approval"


def test_the_service_decides_the_refresh_rule_on_the_state_it_restored(
    tmp_path, ratchet_keys, enqueued, restores
) -> None:
    run_id = expired_approval_run(tmp_path)
    fingerprint = _fingerprint(run_id)
    restores.clear()

    with pytest.raises(ApprovalRefusedError, match="replacing it is a refresh"):
        approval_grant(run_id=run_id, approver="olivia", environment_fingerprint=fingerprint,
                       may_refresh=False)

    assert restores == [run_id]
    assert phase(run_id) == "awaiting_approval"
    outcome = approval_grant(run_id=run_id, approver="olivia", environment_fingerprint=fingerprint)
    assert outcome.outcome == "refreshed", "without the restriction a grant over old evidence refreshes"
