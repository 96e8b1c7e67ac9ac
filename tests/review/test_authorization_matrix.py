"""Authorization matrix: every dashboard URL x every persona x (page, htmx fragment) gets the right
status code, the check is made by the view, not the template, and no change goes through without
CSRF (issue: "Roles: operator (approve, deny, refresh, cancel), reviewer (decide cases), admin
(all, plus trace); every change is a POST with CSRF")."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import unquote

import pytest
from django.test import Client
from django.urls import URLPattern, get_resolver, reverse

import runtime.approvals
import runtime.engine
import runtime.reviews
from review.forms import binding_token
from review.permissions import Perm
from runtime.approvals import ApprovalOutcome
from runtime.attachments import attachment_put
from runtime.core.evidence import DECISION_BOUND_FIELDS
from runtime.gateway.tokens import token_issue
from runtime.models import GatewayToken, ReviewCase
from runtime.reviews import DecisionOutcome
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
    "cases": (DECIDE, ("cases",)),
    "case": (DECIDE, ()),
    "run-tokens": (OPERATE, ()),
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
    "run-cancel": {**OPERATE, "operator": 303, "admin": 303},
    "decide": {**DECIDE, "reviewer": 303, "admin": 303},
}
EXPECTED_PERMISSION = {
    "runs": Perm.VIEW_RUNS,
    "run": Perm.VIEW_RUNS,
    "attachment": Perm.VIEW_RUNS,
    "trace": Perm.VIEW_TRACE,
    "health": Perm.VIEW_RUNS,
    "run-bundle": Perm.VIEW_TRACE,
    "approvals": Perm.APPROVE_ACTION,
    "cases": Perm.DECIDE_CASE,
    "case": Perm.DECIDE_CASE,
    "run-tokens": Perm.CANCEL_RUN,
    "approve": Perm.APPROVE_ACTION,
    "refresh": Perm.REFRESH_APPROVAL,
    "deny": Perm.DENY_ACTION,
    "run-cancel": Perm.CANCEL_RUN,
    "decide": Perm.DECIDE_CASE,
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
        "run-cancel": reverse("review:run-cancel", args=["run-matrix"]),
        "decide": reverse("review:decide", args=["case-matrix"]),
        "run-tokens": reverse("review:run-tokens", args=["run-matrix"]),
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

    monkeypatch.setattr(runtime.approvals, "approval_grant", grant)
    monkeypatch.setattr(runtime.approvals, "approval_refresh", grant)
    monkeypatch.setattr(runtime.approvals, "approval_deny", deny)
    monkeypatch.setattr(runtime.engine, "run_request_cancel",
                        lambda **kw: calls.append(("cancel", kw)))
    monkeypatch.setattr(runtime.reviews, "decision_sign_for", sign)
    monkeypatch.setattr(runtime.reviews, "case_decide", decide)
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
    if name == "decide":
        binding = {field: "x" for field in DECISION_BOUND_FIELDS}
        return {"decision": "abort", "password": PASSWORD,
                "binding": binding_token(case_id="case-matrix", binding=binding)}
    return {}


def _review_patterns() -> list[URLPattern]:
    resolver = get_resolver()
    for entry in resolver.url_patterns:
        if getattr(entry, "namespace", None) == "review":
            return list(entry.url_patterns)
    raise AssertionError("the review URLs are not mounted")


def test_every_dashboard_url_is_in_the_matrix() -> None:
    names = {p.name for p in _review_patterns()}
    assert names == set(MATRIX) | set(ACTIONS), (
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
    client = client_for(persona, enforce_csrf_checks=True)
    data = {**_action_data(name), "csrfmiddlewaretoken": _csrf_token(client)}
    response = client.post(urls[name], data)
    assert response.status_code == expected, response.content[:300]
    if expected == 303:
        assert services, "the change reached the runtime service"
        who = [c for c in services if c[0] in ("approval", "deny", "cancel", "sign")][0][1]
        signer = who.get("approver") or who.get("requested_by") or who.get("reviewer")
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
