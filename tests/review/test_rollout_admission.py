"""Story: an admin runs the admission gate from the dashboard (DESIGN.md section 8.3).

A duplicate submission closes a tenant and task. Every page then shows a banner listing the
scope's runs with unresolved pending side effects, each linked, so they are checked one by one.
The admin raises a threshold (a confirmation page first, then an audit row naming who, when,
old, new and why) and the gate uses it at once; or re-opens the scope with a decision signed like
the command line's, which the evidence bundle of the scope's runs carries with the closing and
the threshold change. Non-admins and admins of other tenants cannot see or change any of it.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from review.scope import scope_set
from runtime.bundles.export import bundle_export
from runtime.errors import AdmissionClosedError
from runtime.evidence.trace import trace_append
from runtime.models import AdmissionClosing, AdmissionDecision, AdmissionThreshold, AdmissionThresholdChange
from runtime.rollout.admission import admission_check, admission_decision_verify, admission_state
from tests.factories import make_state
from tests.review.rows import add_events, build_run, pending_state

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _keys(all_root_keys):  # type: ignore[no-untyped-def]
    return all_root_keys


def _run_with_pending_write(keyring, *, run_id: str, tenant: str = "acme", task: str = "orders"):  # type: ignore[no-untyped-def]
    """A run in phase pending whose proposed write has no receipt (a pending side effect)."""
    state = pending_state(make_state(run_id=run_id))
    run = build_run(keyring, run_id=run_id, phase="pending", state=state, tenant=tenant, task=task)
    add_events(run, 1, event_type="intent.proposed", payload={
        "idempotency_key": state.pending.idempotency_key, "intent_digest": state.pending.intent_digest})
    return run, state.pending.idempotency_key


def _close(run_id: str) -> None:
    """A duplicate found by the run's effect audit: one closes admission by default."""
    trace_append(run_id=run_id, event_type="audit.effects", payload={"keys": 2, "duplicates": 1, "missing": []})


def _refused(tenant: str, task: str) -> bool:
    try:
        admission_check(tenant_id=tenant, task_id=task)
    except AdmissionClosedError:
        return True
    return False


def test_it_lists_the_runs_with_pending_side_effects_in_the_banner(client_for, checkpoint_keyring) -> None:
    _, key = _run_with_pending_write(checkpoint_keyring, run_id="run-pending")
    build_run(checkpoint_keyring, run_id="run-done", phase="completed", tenant="acme", task="orders")
    _close("run-done")

    page = client_for("operator").get(reverse("review:runs")).content.decode()
    banner = page.split("admission-banner", 1)[1].split("</div>", 1)[0]

    assert "New runs are refused" in page and "duplicate_submissions is 1 (threshold 0)" in banner
    assert f'href="{reverse("review:run", args=["run-pending"])}"' in banner
    assert key[:20] in banner
    assert "run-done" not in banner, "a completed run has nothing pending"
    assert "Review and re-open" not in banner, "an operator is pointed to an admin, not to the form"
    assert "Review and re-open" in client_for("admin").get(reverse("review:runs")).content.decode()


def test_it_keeps_another_tenants_closed_scope_out_of_the_banner(client_for, personas, checkpoint_keyring) -> None:
    _run_with_pending_write(checkpoint_keyring, run_id="run-b", tenant="beta")
    _close("run-b")
    scope_set(user=personas["operator"], tenant_ids=["acme"])

    page = client_for("operator").get(reverse("review:runs")).content.decode()

    assert "New runs are refused" not in page and "run-b" not in page


def test_an_admin_edits_a_threshold_after_confirming_and_the_gate_uses_it(client_for, checkpoint_keyring) -> None:
    _run_with_pending_write(checkpoint_keyring, run_id="run-1")
    _close("run-1")
    assert _refused("acme", "orders")
    url = reverse("review:admission-threshold", args=["acme", "orders"])
    admin = client_for("admin")
    change = {"name": "max_duplicates", "value": "1", "reason": "one duplicate was a retried test call"}

    confirm = admin.post(url, change)

    assert confirm.status_code == 200 and b"Confirm the threshold change" in confirm.content
    assert not AdmissionThresholdChange.objects.exists(), "nothing changes before the confirmation"
    assert admin.post(url, {**change, "confirm": "yes"}).status_code == 303

    [audit] = AdmissionThresholdChange.objects.all()
    assert (audit.tenant_id, audit.task_id, audit.name) == ("acme", "orders", "max_duplicates")
    assert (audit.old_value, audit.new_value, audit.changed_by) == (None, 1.0, "admin")
    assert audit.reason == change["reason"] and audit.changed_at is not None
    assert admission_state(tenant_id="acme", task_id="orders").open
    assert not _refused("acme", "orders"), "the gate reads the override at the next run start"
    page = admin.get(reverse("review:admission-scope", args=["acme", "orders"])).content.decode()
    assert "override acme/orders" in page and "one duplicate was a retried test call" in page


def test_a_wider_override_applies_to_every_task_of_the_tenant_unless_a_task_has_its_own(client_for) -> None:
    admin = client_for("admin")
    for tenant, task, value in (("acme", "*", "5"), ("acme", "orders", "0")):
        admin.post(reverse("review:admission-threshold", args=[tenant, task]),
                   {"name": "max_duplicates", "value": value, "reason": "policy", "confirm": "yes"})

    from runtime.rollout.admission_thresholds import admission_thresholds

    assert admission_thresholds(tenant_id="acme", task_id="refunds").max_duplicates == 5
    assert admission_thresholds(tenant_id="acme", task_id="orders").max_duplicates == 0
    assert admission_thresholds(tenant_id="beta", task_id="orders").max_duplicates == 0


def test_it_refuses_a_threshold_out_of_range_and_records_nothing(client_for) -> None:
    response = client_for("admin").post(reverse("review:admission-threshold", args=["acme", "orders"]),
                                        {"name": "min_success_rate", "value": "1.5", "reason": "typo",
                                         "confirm": "yes"}, follow=True)

    assert "min_success_rate is a rate between 0 and 1" in response.content.decode()
    assert not AdmissionThreshold.objects.exists() and not AdmissionThresholdChange.objects.exists()


@pytest.mark.parametrize("persona", ["operator", "reviewer", "stranger"])
def test_it_refuses_non_admins(client_for, persona: str) -> None:
    client = client_for(persona)
    scope = ["acme", "orders"]

    assert client.get(reverse("review:rollout")).status_code == 403
    assert client.get(reverse("review:admission-scope", args=scope)).status_code == 403
    assert client.post(reverse("review:admission-threshold", args=scope), {
        "name": "max_duplicates", "value": "9", "reason": "x", "confirm": "yes"}).status_code == 403
    assert client.post(reverse("review:admission-reopen", args=scope),
                       {"reason": "x", "checked": "on"}).status_code == 403
    assert not AdmissionThresholdChange.objects.exists() and not AdmissionDecision.objects.exists()


def test_it_refuses_a_user_with_the_trace_permission_but_not_the_admin_role(client_for, personas) -> None:
    group = Group.objects.create(name="trace-readers")
    group.permissions.add(Permission.objects.get(content_type__app_label="review", codename="view_trace"))
    personas["stranger"].groups.add(group)
    scope_set(group=group, all_tenants=True)

    response = client_for("stranger").post(reverse("review:admission-threshold", args=["acme", "orders"]), {
        "name": "max_duplicates", "value": "9", "reason": "x", "confirm": "yes"})

    assert response.status_code == 403
    assert not AdmissionThresholdChange.objects.exists()


def test_an_admin_of_one_tenant_gets_404_for_another_tenant_and_the_global_scope(
        client_for, personas, checkpoint_keyring) -> None:
    _run_with_pending_write(checkpoint_keyring, run_id="run-b", tenant="beta")
    _close("run-b")
    scope_set(user=personas["admin"], tenant_ids=["acme"])
    admin = client_for("admin")
    change = {"name": "max_duplicates", "value": "9", "reason": "x", "confirm": "yes"}

    assert admin.get(reverse("review:admission-scope", args=["beta", "orders"])).status_code == 404
    assert admin.post(reverse("review:admission-threshold", args=["beta", "orders"]), change).status_code == 404
    assert admin.post(reverse("review:admission-threshold", args=["*", "*"]), change).status_code == 404
    assert admin.post(reverse("review:admission-reopen", args=["beta", "orders"]),
                      {"reason": "x", "checked": "on"}).status_code == 404
    assert "beta/orders" not in admin.get(reverse("review:rollout")).content.decode()
    assert admin.post(reverse("review:admission-threshold", args=["acme", "*"]), change).status_code == 303
    assert not AdmissionDecision.objects.exists()
    assert list(AdmissionThresholdChange.objects.values_list("tenant_id", "task_id")) == [("acme", "*")]


def test_an_admin_reopens_from_the_dashboard_with_a_signed_decision_that_the_bundle_carries(
        client_for, checkpoint_keyring) -> None:
    _run_with_pending_write(checkpoint_keyring, run_id="run-1")
    _close("run-1")
    assert _refused("acme", "orders")
    admin = client_for("admin")
    url = reverse("review:admission-reopen", args=["acme", "orders"])
    admin.post(reverse("review:admission-threshold", args=["acme", "orders"]),
               {"name": "min_recoveries", "value": "3", "reason": "small task", "confirm": "yes"})

    unchecked = admin.post(url, {"reason": "checked the pending write"}, follow=True)
    assert "Admission was not re-opened" in unchecked.content.decode() and not AdmissionDecision.objects.exists()
    assert admin.post(url, {"reason": "checked the pending write", "checked": "on"}).status_code == 303

    decision = AdmissionDecision.objects.get()
    admission_decision_verify(decision)
    assert (decision.decided_by, decision.reason) == ("admin", "checked the pending write")
    assert decision.body["closed_by"] == {"metric": "duplicate_submissions", "value": 1, "threshold": 0}
    assert not _refused("acme", "orders")
    closing = AdmissionClosing.objects.get()
    assert (closing.metric, closing.value, closing.threshold) == ("duplicate_submissions", 1.0, 0.0)

    log = bundle_export(run_id="run-1", exported_by="admin")["rollout"]
    kinds = [entry["kind"] for entry in log["admission"]]
    assert kinds == ["admission.closed", "admission.threshold_changed", "admission.reopened"]
    reopened = log["admission"][-1]
    assert (reopened["decided_by"], reopened["body"], reopened["signature"]) == (
        "admin", decision.body, decision.signature)
    assert log["admission"][1]["changed_by"] == "admin" and log["admission"][1]["new"] == 3.0


def test_it_refuses_to_reopen_a_scope_that_never_existed(client_for) -> None:
    response = client_for("admin").post(reverse("review:admission-reopen", args=["acme", "no-such-task"]),
                                        {"reason": "typo", "checked": "on"}, follow=True)

    assert "no such admission scope" in response.content.decode()
    assert not AdmissionDecision.objects.exists()
