"""Authorization matrix: every dashboard URL x every persona x (page, htmx fragment) gets the right
status code, the check is made by the view, not the template, and no change goes through without
CSRF: operator (approve, deny, refresh, cancel), reviewer (decide cases), admin (all, plus the
trace browser), every change a POST (DESIGN.md section 6.6; STYLE.md rule 6)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from urllib.parse import unquote

import pytest
from django.test import Client
from django.urls import URLPattern, get_resolver, reverse

import review.notifications.subscriptions
import runtime.decisions.amendments
import runtime.decisions.approvals
import runtime.decisions.batch
import runtime.decisions.cancellation
import runtime.decisions.denials
import runtime.decisions.reviews
import runtime.decisions.second_chances
import runtime.ownership.reregistration
import runtime.rollout.admission
import runtime.rollout.admission_thresholds
import runtime.rollout.combinations
from review.forms import binding_token
from review.permissions import Perm
from runtime.core.evidence import DECISION_BOUND_FIELDS
from runtime.decisions.amendments import AmendmentOutcome
from runtime.decisions.approvals import ApprovalOutcome
from runtime.decisions.reviews import DecisionOutcome
from runtime.evidence.attachments import attachment_put
from runtime.gateway.tokens import token_issue
from runtime.models import GatewayToken, ReviewCase, Run
from tests.factories import make_state
from tests.review.conftest import PASSWORD, PERSONAS
from tests.review.rows import build_run

READ = {"anonymous": 302, "stranger": 403, "operator": 200, "reviewer": 200, "admin": 200}
TRACE = {"anonymous": 302, "stranger": 403, "operator": 403, "reviewer": 403, "admin": 200}
OPERATE = {"anonymous": 302, "stranger": 403, "operator": 200, "reviewer": 403, "admin": 200}
DECIDE = {"anonymous": 302, "stranger": 403, "operator": 403, "reviewer": 200, "admin": 200}

# url name -> (expected GET status per persona, htmx targets the page answers with a fragment)
MATRIX: dict[str, tuple[dict[str, int], tuple[str, ...]]] = {
    "runs": (READ, ("runs",)),
    "run": (READ, ("run-status", "checkpoints", "timeline")),
    "attachment": (READ, ()),
    "trace": (TRACE, ("events",)),
    "health": (READ, ()),
    "run-bundle": (TRACE, ()),
    "approvals": (OPERATE, ("approvals",)),
    "approval-amend": (OPERATE, ()),
    "cases": (DECIDE, ("cases",)),
    "case": (DECIDE, ()),
    "run-tokens": (OPERATE, ()),
    "workers": (OPERATE, ()),
    "passkeys": (DECIDE, ()),
    "notifications": (READ, ("endpoints",)),
    "rollout": (TRACE, ()),
    "admission-scope": (TRACE, ()),
    "combinations": (TRACE, ()),
    "combination": (TRACE, ()),
}
# MATRIX pages that also take a change by POST (with CSRF): 303 when the change goes through
POSTABLE_PAGES: dict[str, dict[str, int]] = {
    "run-tokens": {**OPERATE, "operator": 303, "admin": 303},
}
# url name -> expected status of a POST with a valid CSRF token (303: the change went through)
ACTIONS: dict[str, dict[str, int]] = {
    "approve": {**OPERATE, "operator": 303, "admin": 303},
    "refresh": {**OPERATE, "operator": 303, "admin": 303},
    "deny": {**OPERATE, "operator": 303, "admin": 303},
    "amend": {**OPERATE, "operator": 303, "admin": 303},
    "approvals-batch": {**OPERATE, "operator": 303, "admin": 303},
    "run-cancel": {**OPERATE, "operator": 303, "admin": 303},
    "run-resume": {**OPERATE, "operator": 303, "admin": 303},
    "run-again": {**OPERATE, "operator": 303, "admin": 303},
    "decide": {**DECIDE, "reviewer": 303, "admin": 303},
    "environment-reregister": {**DECIDE, "reviewer": 303, "admin": 303},
    "admission-threshold": {**TRACE, "admin": 303},
    "admission-reopen": {**TRACE, "admin": 303},
    "combination-promote": {**TRACE, "admin": 303},
    "combination-rollback": {**TRACE, "admin": 303},
    # Anyone who may read runs manages their own notification endpoints.
    "notification-change": {**READ, "operator": 303, "reviewer": 303, "admin": 303},
    "notification-add": {**READ, "operator": 303, "reviewer": 303, "admin": 303},
}
# Passkey ceremony endpoints (JSON, POST only): the status of a POST with a valid CSRF token and
# an empty body; 400 means the role got through and the body was refused as incomplete.
# None of them signs anything without an authenticator's answer.
CEREMONIES: dict[str, dict[str, int]] = {
    "passkey-options": {**DECIDE, "reviewer": 200, "admin": 200},
    "passkey-register": {**DECIDE, "reviewer": 400, "admin": 400},
    "decide-passkey-options": {**DECIDE, "reviewer": 400, "admin": 400},
    # The decision page's script follows a JSON redirect; the refusal travels as a message.
    "decide-passkey": {**DECIDE, "reviewer": 200, "admin": 200},
}
EXPECTED_PERMISSION = {
    "runs": Perm.VIEW_RUNS,
    "run": Perm.VIEW_RUNS,
    "attachment": Perm.VIEW_RUNS,
    "trace": Perm.VIEW_TRACE,
    "health": Perm.VIEW_RUNS,
    "run-bundle": Perm.VIEW_TRACE,
    "approvals": Perm.APPROVE_ACTION,
    "approval-amend": Perm.AMEND_ACTION,
    "amend": Perm.AMEND_ACTION,
    "cases": Perm.DECIDE_CASE,
    "case": Perm.DECIDE_CASE,
    "run-tokens": Perm.CANCEL_RUN,
    "workers": Perm.CANCEL_RUN,
    "passkeys": Perm.DECIDE_CASE,
    "notifications": Perm.VIEW_RUNS,
    "notification-add": Perm.VIEW_RUNS,
    "notification-change": Perm.VIEW_RUNS,
    "passkey-options": Perm.DECIDE_CASE,
    "passkey-register": Perm.DECIDE_CASE,
    "decide-passkey-options": Perm.DECIDE_CASE,
    "decide-passkey": Perm.DECIDE_CASE,
    "approve": Perm.APPROVE_ACTION,
    "refresh": Perm.REFRESH_APPROVAL,
    "deny": Perm.DENY_ACTION,
    "approvals-batch": Perm.APPROVE_ACTION,
    "run-cancel": Perm.CANCEL_RUN,
    "run-resume": Perm.RESTART_RUN,
    "run-again": Perm.RESTART_RUN,
    "decide": Perm.DECIDE_CASE,
    "environment-reregister": Perm.DECIDE_CASE,
    "rollout": Perm.VIEW_TRACE,
    "admission-scope": Perm.VIEW_TRACE,
    "admission-threshold": Perm.VIEW_TRACE,
    "admission-reopen": Perm.VIEW_TRACE,
    "combinations": Perm.VIEW_TRACE,
    "combination": Perm.VIEW_TRACE,
    "combination-promote": Perm.VIEW_TRACE,
    "combination-rollback": Perm.VIEW_TRACE,
}


@pytest.fixture
def urls(checkpoint_keyring, personas) -> dict[str, str]:  # type: ignore[no-untyped-def]
    blob = attachment_put(data=b"screenshot bytes", content_type="image/png")
    state = make_state(run_id="run-matrix")
    state.environment = state.environment.model_copy(update={"attachments": [blob]})
    run = build_run(checkpoint_keyring, run_id="run-matrix", state=state, owner_worker="w1")
    ReviewCase.objects.create(case_id="case-matrix", run=run, status="aborted",
                              reason="receipt_conflict", decided_by="someone")
    token_issue(run_id="run-matrix", agent="matrix-agent")
    combo = runtime.rollout.combinations.combination_register(
        fields={"task": f"{run.tenant_id}/{run.task_id}", "model": "matrix"}, actor="matrix", reason="matrix")
    scope = [run.tenant_id, run.task_id]
    return {
        "runs": reverse("review:runs"),
        "run": reverse("review:run", args=["run-matrix"]),
        "attachment": reverse("review:attachment", args=[blob]),
        "trace": reverse("review:trace"),
        "health": reverse("review:health"),
        "run-bundle": reverse("review:run-bundle", args=["run-matrix"]),
        "approvals": reverse("review:approvals"),
        "cases": reverse("review:cases"),
        "case": reverse("review:case", args=["case-matrix"]),
        "approve": reverse("review:approve", args=["run-matrix"]),
        "refresh": reverse("review:refresh", args=["run-matrix"]),
        "deny": reverse("review:deny", args=["run-matrix"]),
        "approval-amend": reverse("review:approval-amend", args=["run-matrix"]),
        "amend": reverse("review:amend", args=["run-matrix"]),
        "approvals-batch": reverse("review:approvals-batch"),
        "run-cancel": reverse("review:run-cancel", args=["run-matrix"]),
        "run-resume": reverse("review:run-resume", args=["run-matrix"]),
        "run-again": reverse("review:run-again", args=["run-matrix"]),
        "environment-reregister": reverse("review:environment-reregister", args=["run-matrix"]),
        "decide": reverse("review:decide", args=["case-matrix"]),
        "run-tokens": reverse("review:run-tokens", args=["run-matrix"]),
        "workers": reverse("review:workers"),
        "passkeys": reverse("review:passkeys"),
        "notifications": reverse("review:notifications"),
        "notification-add": reverse("review:notification-add"),
        "notification-change": reverse("review:notification-change"),
        "passkey-options": reverse("review:passkey-options"),
        "passkey-register": reverse("review:passkey-register"),
        "decide-passkey-options": reverse("review:decide-passkey-options", args=["case-matrix"]),
        "decide-passkey": reverse("review:decide-passkey", args=["case-matrix"]),
        "rollout": reverse("review:rollout"),
        "admission-scope": reverse("review:admission-scope", args=scope),
        "admission-threshold": reverse("review:admission-threshold", args=scope),
        "admission-reopen": reverse("review:admission-reopen", args=scope),
        "combinations": reverse("review:combinations"),
        "combination": reverse("review:combination", args=[combo.combination_id]),
        "combination-promote": reverse("review:combination-promote", args=[combo.combination_id]),
        "combination-rollback": reverse("review:combination-rollback", args=[combo.combination_id]),
    }


@pytest.fixture
def services(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict]]:
    """Record the runtime services the actions call, instead of running them: the matrix is
    about who reaches them (the stories in test_approve_action.py and friends run them for real).
    """
    calls: list[tuple[str, dict]] = []
    now = datetime.now(UTC)

    def grant(**kwargs):  # type: ignore[no-untyped-def]
        calls.append(("approval", kwargs))
        return ApprovalOutcome(kwargs["run_id"], "granted", "appr_1", now, "pending")

    def deny(**kwargs):  # type: ignore[no-untyped-def]
        calls.append(("deny", kwargs))
        return ApprovalOutcome(kwargs["run_id"], "denied", None, None, "failed")

    def sign(**kwargs):  # type: ignore[no-untyped-def]
        calls.append(("sign", kwargs))
        return object()

    def decide(**kwargs):  # type: ignore[no-untyped-def]
        calls.append(("decide", kwargs))
        return DecisionOutcome("case-matrix", "run-matrix", True, "abort", "failed")

    monkeypatch.setattr(runtime.decisions.approvals, "approval_grant", grant)
    monkeypatch.setattr(runtime.decisions.approvals, "approval_refresh", grant)
    monkeypatch.setattr(runtime.decisions.amendments, "approval_amend", lambda **kw: calls.append(
        ("approval", kw)) or AmendmentOutcome(kw["run_id"], "amended", "amd_1", "appr_1", now, "sha256:" + "a" * 64,
                                              "sha256:" + "b" * 64, "pending"))
    monkeypatch.setattr(runtime.decisions.denials, "approval_deny", deny)

    def batch(**kwargs):  # type: ignore[no-untyped-def]
        calls.append(("approval", kwargs))
        return [runtime.decisions.batch.BatchResult(i.run_id, True, "granted", "pending") for i in kwargs["items"]]

    monkeypatch.setattr(runtime.decisions.batch, "approvals_batch_decide", batch)
    monkeypatch.setattr(runtime.decisions.cancellation, "run_request_cancel",
                        lambda **kw: calls.append(("cancel", kw)))
    monkeypatch.setattr(runtime.decisions.second_chances, "run_resume_request", lambda **kw: calls.append(
        ("restart", kw)) or SimpleNamespace(event="run.blocked"))
    monkeypatch.setattr(runtime.decisions.second_chances, "run_again",
                        lambda **kw: calls.append(("restart", kw)) or "run-matrix")
    monkeypatch.setattr(runtime.decisions.reviews, "decision_sign_for", sign)
    monkeypatch.setattr(runtime.decisions.reviews, "case_decide", decide)
    monkeypatch.setattr(runtime.ownership.reregistration, "reregistration_sign",
                        lambda **kw: calls.append(("sign", kw)) or {})
    monkeypatch.setattr(runtime.ownership.reregistration, "environment_reregister", lambda **kw: calls.append(
        ("reregister", kw)) or SimpleNamespace(instance_id="env", token_before=1, token_after=2, runs_traced=()))
    # The rollout actions (admins only): each records who it was called as.
    monkeypatch.setattr(runtime.rollout.admission, "admission_reopen",
                        lambda **kw: calls.append(("rollout", kw)) or SimpleNamespace(key_id="k"))
    monkeypatch.setattr(runtime.rollout.admission_thresholds, "admission_threshold_set", lambda **kw: calls.append(
        ("rollout", kw)) or SimpleNamespace(name=kw["name"], old_value=None, new_value=kw["value"]))
    monkeypatch.setattr(runtime.rollout.combinations, "combination_promote",
                        lambda **kw: calls.append(("rollout", kw)) or SimpleNamespace(state="active", share=1.0))
    monkeypatch.setattr(runtime.rollout.combinations, "combination_rollback",
                        lambda **kw: calls.append(("rollout", kw)) or [])
    # Notification settings (anyone who reads runs): each records who it was called for.
    monkeypatch.setattr(review.notifications.subscriptions, "endpoint_create",
                        lambda **kw: calls.append(("notify", kw)) or SimpleNamespace(name=kw["name"]))
    monkeypatch.setattr(review.notifications.subscriptions, "endpoint_update",
                        lambda **kw: calls.append(("notify", kw)))
    return calls


def _csrf_token(client: Client) -> str:
    """The CSRF cookie any page of the dashboard sets (the sign-in page, or the 403 page)."""
    client.get(reverse("login"))
    client.get(reverse("review:runs"))
    return client.cookies["csrftoken"].value


def _action_data(name: str) -> dict[str, str]:
    if name in ("approve", "refresh"):
        return {"environment_fingerprint": "sha256:" + "a" * 64}
    if name == "deny":
        return {"reason": "not today"}
    if name == "amend":
        return {"arguments": "{}", "proposed_intent_digest": "sha256:" + "a" * 64,
                "environment_fingerprint": "sha256:" + "a" * 64, "step": "confirm"}
    if name == "approvals-batch":
        return {"decision": "approve", "item": f"run-matrix|sha256:{'b' * 64}|sha256:{'a' * 64}"}
    if name == "admission-threshold":
        return {"name": "max_duplicates", "value": "2", "reason": "matrix", "confirm": "yes"}
    if name in ("admission-reopen", "combination-promote", "combination-rollback"):
        return {"reason": "matrix", "checked": "on", "confirm": "on", "share": "1"}
    if name == "decide":
        binding = {field: "x" for field in DECISION_BOUND_FIELDS}
        return {"decision": "abort", "password": PASSWORD,
                "binding": binding_token(case_id="case-matrix", binding=binding)}
    if name == "notification-add":
        return {"name": "matrix", "channel": "webhook", "target": "http://127.0.0.1:9/hook", "kinds": "run_failed"}
    if name == "environment-reregister":
        return {"observed_fence": "5", "reason": "matrix", "password": PASSWORD}
    if name == "notification-change":
        return {"endpoint_id": "1", "change": "toggle"}
    return {}


def _review_patterns() -> list[URLPattern]:
    resolver = get_resolver()
    for entry in resolver.url_patterns:
        if getattr(entry, "namespace", None) == "review":
            return list(entry.url_patterns)
    raise AssertionError("the review URLs are not mounted")


def test_every_dashboard_url_is_in_the_matrix() -> None:
    names = {p.name for p in _review_patterns()}
    assert names == set(MATRIX) | set(ACTIONS) | set(CEREMONIES), (
        "add new dashboard URLs to MATRIX or ACTIONS with their expected status codes"
    )


def test_every_dashboard_view_checks_its_permission_in_the_view() -> None:
    for pattern in _review_patterns():
        required = getattr(pattern.callback, "required_permission", None)
        assert required == EXPECTED_PERMISSION[pattern.name], pattern.name


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("name", sorted(MATRIX))
def test_it_gives_each_persona_the_right_status_for_each_page(
    client_for, urls, name: str, persona: str
) -> None:
    expected = MATRIX[name][0][persona]
    response = client_for(persona).get(urls[name])
    assert response.status_code == expected
    if expected == 302:
        assert unquote(response["Location"]).startswith(f"/accounts/login/?next={urls[name]}")


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize(
    ("name", "target"),
    [(name, target) for name, (_, targets) in sorted(MATRIX.items()) for target in targets],
)
def test_it_checks_htmx_fragment_requests_exactly_like_pages(
    client_for, urls, name: str, target: str, persona: str
) -> None:
    expected = MATRIX[name][0][persona]
    response = client_for(persona).get(
        urls[name],
        headers={"HX-Request": "true", "HX-Target": target, "HX-Current-URL": "http://testserver/"},
    )
    if persona == "anonymous":
        # A fragment must not receive the login page: the browser is sent to sign in instead.
        assert response.status_code == 401
        assert response["HX-Redirect"] == "/accounts/login/?next=%2F"
        return
    assert response.status_code == expected
    if expected == 200:
        assert b"<html" not in response.content, "an htmx request gets the fragment, not the page"
        assert f'id="{target}"'.encode() in response.content


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_it_lets_only_the_right_roles_make_each_change(
    client_for, urls, services, name: str, persona: str
) -> None:
    expected = ACTIONS[name][persona]
    if name == "environment-reregister":  # frozen by a raised fence: the one stop it is for
        Run.objects.filter(run_id="run-matrix").update(stop_reason="adapter_refused")
    client = client_for(persona, enforce_csrf_checks=True)
    data = {**_action_data(name), "csrfmiddlewaretoken": _csrf_token(client)}
    response = client.post(urls[name], data)
    assert response.status_code == expected, response.content[:300]
    if expected == 303:
        assert services, "the change reached the runtime service"
        changes = ("approval", "deny", "cancel", "sign", "rollout", "notify", "restart")
        who = [c for c in services if c[0] in changes][0][1]
        signer = (who.get("approver") or who.get("requested_by") or who.get("reviewer") or who.get("decided_by")
                  or who.get("changed_by") or who.get("actor") or getattr(who.get("user"), "username", None))
        assert signer == persona, "the signer is the signed-in user"
    else:
        assert services == [], "no change without the role"
    if expected == 302:
        assert unquote(response["Location"]).startswith(f"/accounts/login/?next={urls[name]}")


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_it_never_changes_anything_on_get(
    client_for, urls, services, name: str, persona: str
) -> None:
    expected = ACTIONS[name][persona]
    response = client_for(persona).get(urls[name])
    assert response.status_code == (405 if expected == 303 else expected)
    assert services == []


@pytest.mark.parametrize("persona", ["operator", "reviewer", "admin"])
@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_no_change_goes_through_without_csrf(
    client_for, urls, services, name: str, persona: str
) -> None:
    client = client_for(persona, enforce_csrf_checks=True)
    response = client.post(urls[name], _action_data(name))
    assert response.status_code == 403
    assert b"security token" in response.content, "refused by the CSRF check, before the view"
    assert services == [], "the runtime service was never called"


@pytest.mark.parametrize("persona", ["operator", "reviewer", "admin"])
@pytest.mark.parametrize("name", sorted(set(MATRIX) - set(POSTABLE_PAGES)))
def test_it_refuses_to_change_anything_through_read_pages(
    client_for, urls, name: str, persona: str
) -> None:
    expected = MATRIX[name][0][persona]
    response = client_for(persona).post(urls[name])
    assert response.status_code == (405 if expected == 200 else expected)


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("name", sorted(CEREMONIES))
def test_it_lets_only_reviewers_start_a_passkey_ceremony(
    client_for, urls, name: str, persona: str
) -> None:
    expected = CEREMONIES[name][persona]
    client = client_for(persona, enforce_csrf_checks=True)
    response = client.post(urls[name], {"csrfmiddlewaretoken": _csrf_token(client)})
    assert response.status_code == expected, response.content[:300]
    if expected == 302:
        assert unquote(response["Location"]).startswith(f"/accounts/login/?next={urls[name]}")
    if persona == "reviewer":
        assert client.get(urls[name]).status_code == 405, "a ceremony never starts on GET"


def _live_tokens() -> set[str]:
    return set(GatewayToken.objects.filter(run_id="run-matrix", revoked_at__isnull=True)
               .values_list("token_id", flat=True))


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("name", sorted(POSTABLE_PAGES))
def test_it_lets_only_the_right_roles_post_to_pages_that_take_a_change(
    client_for, urls, name: str, persona: str
) -> None:
    """Like ACTIONS, for a page that lists (GET) and changes (POST): the run's tokens page
    revokes a token (the service runs for real: the matrix run has one live token)."""
    expected = POSTABLE_PAGES[name][persona]
    [token_id] = _live_tokens()
    client = client_for(persona, enforce_csrf_checks=True)
    data = {"token_id": token_id, "csrfmiddlewaretoken": _csrf_token(client)}
    response = client.post(urls[name], data)
    assert response.status_code == expected, response.content[:300]
    if expected == 303:
        assert response["Location"] == urls[name]
        assert _live_tokens() == set(), "the change went through"
    else:
        assert _live_tokens() == {token_id}, "no change without the role"
    if expected == 302:
        assert unquote(response["Location"]).startswith(f"/accounts/login/?next={urls[name]}")


# The tokens page's second change: issuing a token answers the page itself (200) with the secret
# shown once, never a redirect that would have to carry it.
ISSUE_TOKEN = {**OPERATE, "operator": 200, "admin": 200}


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_lets_only_the_right_roles_issue_a_token_from_the_tokens_page(client_for, urls, persona: str) -> None:
    expected = ISSUE_TOKEN[persona]
    before = _live_tokens()
    client = client_for(persona, enforce_csrf_checks=True)
    data = {"intent": "issue", "agent": "matrix-issued", "csrfmiddlewaretoken": _csrf_token(client)}
    response = client.post(urls["run-tokens"], data)
    assert response.status_code == expected, response.content[:300]
    if expected == 200:
        [new] = _live_tokens() - before
        assert f"rgw_{new}_".encode() in response.content, "the secret is shown this once"
        assert "no-store" in response["Cache-Control"]
    else:
        assert _live_tokens() == before, "no token without the role"
    if expected == 302:
        assert unquote(response["Location"]).startswith(f"/accounts/login/?next={urls['run-tokens']}")
    without_csrf = client_for(persona, enforce_csrf_checks=True).post(urls["run-tokens"], {"intent": "issue"})
    assert without_csrf.status_code in (302, 403) and len(_live_tokens() - before) <= 1


@pytest.mark.parametrize("persona", ["operator", "reviewer", "admin"])
@pytest.mark.parametrize("name", sorted(POSTABLE_PAGES))
def test_no_change_goes_through_a_page_without_csrf(
    client_for, urls, name: str, persona: str
) -> None:
    [token_id] = _live_tokens()
    client = client_for(persona, enforce_csrf_checks=True)
    response = client.post(urls[name], {"token_id": token_id})
    assert response.status_code == 403
    assert b"security token" in response.content, "refused by the CSRF check, before the view"
    assert _live_tokens() == {token_id}


def test_it_answers_404_for_a_run_that_does_not_exist_only_after_the_permission_check(
    client_for, urls
) -> None:
    url = reverse("review:run", args=["no-such-run"])
    assert client_for("stranger").get(url).status_code == 403
    assert client_for("operator").get(url).status_code == 404


@pytest.mark.parametrize("persona", PERSONAS)
def test_sign_in_and_sign_out_answer_every_persona(client_for, persona: str) -> None:
    """The auth views complete the matrix: sign-in is public, sign-out is POST only."""
    client = client_for(persona)
    sign_in = client.get(reverse("login"))
    assert sign_in.status_code == (200 if persona == "anonymous" else 302)
    assert client.get(reverse("logout")).status_code == 405
    assert client.post(reverse("logout")).status_code == 302
    assert client.get(reverse("review:runs")).status_code == 302, "signed out afterwards"


# --- the tenant dimension (DESIGN.md section 6.6) ---------------------------------------------
# A user scoped to tenant A gets 404 (never 403: the dashboard does not confirm that a run
# exists) for every run, case, approval, download and action URL of tenant B, and the lists,
# badges and counts leave B out. Users without the URL's permission still get 403 first.

TENANT_A, TENANT_B = "tenant-a", "tenant-b"
SCOPED = ("operator", "reviewer", "admin")


def _waiting_run(keyring, *, run_id: str, tenant: str, blob: str):  # type: ignore[no-untyped-def]
    from runtime.core.checkpoint import Phase as CorePhase
    from runtime.core.checkpoint import StopReason
    from tests.review.rows import add_events, pending_state

    state = pending_state(make_state(run_id=run_id), attachments=[blob])
    state.phase = CorePhase.AWAITING_APPROVAL
    state.stop_reason = StopReason.APPROVAL_REQUIRED
    run = build_run(keyring, run_id=run_id, phase="awaiting_approval", state=state,
                    tenant=tenant, stop_reason="approval_required", owner_worker="")
    diff = attachment_put(data=f"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-{run_id}\n+new\n".encode(),
                          content_type="text/x-diff")
    add_events(run, 1, event_type="intent.proposed", payload={
        "idempotency_key": state.pending.idempotency_key,
        "intent_digest": state.pending.intent_digest, "dry_run_diff": diff})
    return run, diff


@pytest.fixture
def tenants(checkpoint_keyring, personas, django_user_model):  # type: ignore[no-untyped-def]
    """Runs, cases, approvals, attachments and tokens in tenants A and B, and the three roles
    scoped to A (``operator-a``, ``reviewer-a``, ``admin-a``: in their group, narrowed by their
    own scope row)."""
    from django.contrib.auth.models import Group

    from review.scope import scope_set

    made = {}
    for tenant in (TENANT_A, TENANT_B):
        blob = attachment_put(data=f"screenshot of {tenant}".encode(), content_type="image/png")
        run, diff = _waiting_run(checkpoint_keyring, run_id=f"run-{tenant}", tenant=tenant,
                                 blob=blob)
        # Closed, so its page does not observe an environment these rows do not have.
        ReviewCase.objects.create(case_id=f"case-{tenant}", run=run, status="aborted",
                                  reason="receipt_conflict", decided_by="someone")
        token_issue(run_id=run.run_id, agent=f"agent-{tenant}")
        made[tenant] = {"run": run.run_id, "case": f"case-{tenant}", "blob": blob, "diff": diff}
    users = {}
    for role in SCOPED:
        user = django_user_model.objects.create_user(username=f"{role}-a", password=PASSWORD)
        user.groups.add(Group.objects.get(name=role))
        scope_set(user=user, tenant_ids=[TENANT_A])
        users[role] = user
    made["users"] = users
    return made


def _tenant_urls(made: dict, tenant: str) -> dict[str, str]:
    run, case, blob, diff = (made[tenant][k] for k in ("run", "case", "blob", "diff"))
    return {
        "run": reverse("review:run", args=[run]),
        "run-bundle": reverse("review:run-bundle", args=[run]),
        "run-tokens": reverse("review:run-tokens", args=[run]),
        "attachment": reverse("review:attachment", args=[blob]) + f"?run={run}",
        "attachment-diff": reverse("review:attachment", args=[diff]) + f"?run={run}",
        "attachment-bare": reverse("review:attachment", args=[blob]),
        "case": reverse("review:case", args=[case]),
        "approve": reverse("review:approve", args=[run]),
        "refresh": reverse("review:refresh", args=[run]),
        "deny": reverse("review:deny", args=[run]),
        "run-cancel": reverse("review:run-cancel", args=[run]),
        "environment-reregister": reverse("review:environment-reregister", args=[run]),
        "decide": reverse("review:decide", args=[case]),
    }


def _url_perm(name: str) -> Perm:
    return EXPECTED_PERMISSION[name.removesuffix("-diff").removesuffix("-bare")]


def _has(role: str, perm: Perm) -> bool:
    from review.roles import ROLE_PERMS

    return perm in ROLE_PERMS[role]


def _scoped_client(made: dict, role: str, **kwargs: object) -> Client:
    client = Client(**kwargs)
    client.force_login(made["users"][role])
    return client


@pytest.mark.parametrize("role", SCOPED)
def test_it_answers_404_for_every_url_of_another_tenant(tenants, services, role: str) -> None:
    client = _scoped_client(tenants, role, enforce_csrf_checks=True)
    csrf = _csrf_token(client)
    for name, url in _tenant_urls(tenants, TENANT_B).items():
        expected = 404 if _has(role, _url_perm(name)) else 403
        if name in ACTIONS or name == "run-tokens":
            data = {**_action_data(name), "csrfmiddlewaretoken": csrf}
            if name == "run-tokens":
                data["token_id"] = "x"
            response = client.post(url, data)
            assert response.status_code == expected, (name, "POST", response.status_code)
        if name not in ACTIONS:
            response = client.get(url)
            assert response.status_code == expected, (name, "GET", response.status_code)
            response = client.get(url, headers={"HX-Request": "true", "HX-Target": "run-status"})
            assert response.status_code == expected, (name, "htmx", response.status_code)
    assert services == [], "no runtime service was called for another tenant's run"


@pytest.mark.parametrize("role", SCOPED)
def test_it_serves_the_same_urls_of_the_users_own_tenant(tenants, role: str) -> None:
    client = _scoped_client(tenants, role)
    for name, url in _tenant_urls(tenants, TENANT_A).items():
        if name in ACTIONS or name == "attachment-bare":
            continue
        expected = 200 if _has(role, _url_perm(name)) else 403
        assert client.get(url).status_code == expected, name


def test_it_links_a_scoped_users_attachments_through_their_run(tenants) -> None:
    client = _scoped_client(tenants, "operator")
    own = tenants[TENANT_A]
    link = reverse("review:attachment", args=[own["blob"]]) + f"?run={own['run']}"
    assert f'href="{link}"' in client.get(reverse("review:run", args=[own["run"]])).content.decode()
    assert client.get(link).status_code == 200
    diff = reverse("review:attachment", args=[own["diff"]]) + f"?run={own['run']}"
    assert client.get(diff).status_code == 200, "a dry-run diff named by the run's trace"


def test_it_refuses_a_bare_attachment_digest_to_a_scoped_user_but_not_to_an_all_tenants_admin(
    tenants, client_for
) -> None:
    """A digest is content-addressed and shared by every tenant, so a scoped user downloads
    only through a run of their own that references it."""
    bare = _tenant_urls(tenants, TENANT_A)["attachment-bare"]
    assert _scoped_client(tenants, "operator").get(bare).status_code == 404
    assert client_for("admin").get(bare).status_code == 200
    cross = reverse("review:attachment", args=[tenants[TENANT_B]["blob"]]) + (
        f"?run={tenants[TENANT_A]['run']}")
    assert _scoped_client(tenants, "operator").get(cross).status_code == 404, (
        "a run of one's own tenant does not open another tenant's attachment")


def _page(client: Client, name: str, **query: str) -> str:
    url = reverse(f"review:{name}")
    return client.get(url, query).content.decode()


@pytest.mark.parametrize("role", SCOPED)
def test_it_leaves_other_tenants_out_of_lists_and_badges(tenants, role: str) -> None:
    from django.contrib.auth import get_user_model

    from review.queries.live import nav_counts

    ReviewCase.objects.update(status="open")  # the badges count open cases
    client = _scoped_client(tenants, role)
    run_a, run_b = tenants[TENANT_A]["run"], tenants[TENANT_B]["run"]
    runs = _page(client, "runs")
    assert run_a in runs and run_b not in runs
    assert TENANT_B not in _page(client, "runs"), "not even as a filter suggestion"
    if _has(role, Perm.APPROVE_ACTION):
        approvals = _page(client, "approvals")
        assert run_a in approvals and run_b not in approvals
    if _has(role, Perm.DECIDE_CASE):
        cases = _page(client, "cases")
        assert "case-tenant-a" in cases and "case-tenant-b" not in cases
    if _has(role, Perm.VIEW_TRACE):
        trace = client.get(reverse("review:trace")).context["result"]
        assert {e.run_id for e in trace.events} == {run_a}
        assert client.get(reverse("review:trace"), {"run": run_b}).context["result"].events == []
        own = client.get(reverse("review:trace"), {"run": run_a}).context["result"].events
        assert own and {e.run_id for e in own} == {run_a}, "the per-run read keeps the tenant join"
    counts = nav_counts(user=tenants["users"][role])
    assert (counts.approvals, counts.cases) == (1, 1)
    everyone = nav_counts(user=get_user_model().objects.get(username="admin"))
    assert (everyone.approvals, everyone.cases) == (2, 2), "the unscoped admin sees both"


def test_it_polls_lists_without_other_tenants_changes(tenants) -> None:
    """A poll token covers only the user's tenants: a change in B is not a change for A."""
    from review.queries.live import approvals_token, nav_counts

    user = tenants["users"]["operator"]
    before = approvals_token(nav_counts(user=user), user=user)
    ReviewCase.objects.filter(case_id="case-tenant-b").update(status="aborted")
    from runtime.models import Run

    Run.objects.filter(run_id=tenants[TENANT_B]["run"]).update(phase="cancelled")
    assert approvals_token(nav_counts(user=user), user=user) == before


def test_it_counts_only_the_users_tenants_on_the_health_page(tenants, client_for) -> None:
    health = _scoped_client(tenants, "operator").get(reverse("review:health")).context["health"]
    assert health.total_runs == 1
    assert client_for("admin").get(reverse("review:health")).context["health"].total_runs == 2
