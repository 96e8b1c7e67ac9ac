"""Authorization matrix: every dashboard URL x every persona x (page, htmx fragment) gets the right
status code, and the check is made by the view, not the template (issue: "Roles")."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from django.urls import URLPattern, get_resolver, reverse

from review.permissions import Perm
from runtime.attachments import attachment_put
from tests.factories import make_state
from tests.review.conftest import PERSONAS
from tests.review.rows import build_run

READ = {"anonymous": 302, "stranger": 403, "operator": 200, "reviewer": 200, "admin": 200}
TRACE = {"anonymous": 302, "stranger": 403, "operator": 403, "reviewer": 403, "admin": 200}

# url name -> (expected status per persona, htmx targets the page answers with a fragment)
MATRIX: dict[str, tuple[dict[str, int], tuple[str, ...]]] = {
    "runs": (READ, ("runs",)),
    "run": (READ, ("run-status", "checkpoints", "timeline")),
    "attachment": (READ, ()),
    "trace": (TRACE, ("events",)),
    "health": (READ, ()),
}
EXPECTED_PERMISSION = {
    "runs": Perm.VIEW_RUNS,
    "run": Perm.VIEW_RUNS,
    "attachment": Perm.VIEW_RUNS,
    "trace": Perm.VIEW_TRACE,
    "health": Perm.VIEW_RUNS,
}


@pytest.fixture
def urls(checkpoint_keyring, personas) -> dict[str, str]:  # type: ignore[no-untyped-def]
    blob = attachment_put(data=b"screenshot bytes", content_type="image/png")
    state = make_state(run_id="run-matrix")
    state.environment = state.environment.model_copy(update={"attachments": [blob]})
    build_run(checkpoint_keyring, run_id="run-matrix", state=state, owner_worker="w1")
    return {
        "runs": reverse("review:runs"),
        "run": reverse("review:run", args=["run-matrix"]),
        "attachment": reverse("review:attachment", args=[blob]),
        "trace": reverse("review:trace"),
        "health": reverse("review:health"),
    }


def _review_patterns() -> list[URLPattern]:
    resolver = get_resolver()
    for entry in resolver.url_patterns:
        if getattr(entry, "namespace", None) == "review":
            return list(entry.url_patterns)
    raise AssertionError("the review URLs are not mounted")


def test_every_dashboard_url_is_in_the_matrix() -> None:
    names = {p.name for p in _review_patterns()}
    assert names == set(MATRIX), "add new dashboard URLs to MATRIX with their expected status codes"


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


@pytest.mark.parametrize("persona", ["operator", "reviewer", "admin"])
@pytest.mark.parametrize("name", sorted(MATRIX))
def test_it_refuses_to_change_anything_through_read_pages(
    client_for, urls, name: str, persona: str
) -> None:
    expected = MATRIX[name][0][persona]
    response = client_for(persona).post(urls[name])
    assert response.status_code == (405 if expected == 200 else expected)


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
