"""Every change is a POST with CSRF: without the token nothing goes through (DESIGN.md section 6.6)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from tests.review.conftest import PASSWORD


def _token(client: Client, url: str) -> str:
    client.get(url)
    return client.cookies["csrftoken"].value


def test_it_refuses_sign_out_without_a_csrf_token(client_for) -> None:
    client = client_for("operator", enforce_csrf_checks=True)
    response = client.post(reverse("logout"))
    assert response.status_code == 403
    assert b"security token" in response.content
    assert client.get(reverse("review:runs")).status_code == 200, "still signed in"


def test_it_signs_out_with_a_csrf_token(client_for) -> None:
    client = client_for("operator", enforce_csrf_checks=True)
    token = _token(client, reverse("review:runs"))
    response = client.post(reverse("logout"), {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert client.get(reverse("review:runs")).status_code == 302, "signed out"


def test_it_never_signs_out_on_get(client_for) -> None:
    client = client_for("operator")
    assert client.get(reverse("logout")).status_code == 405
    assert client.get(reverse("review:runs")).status_code == 200


def test_it_refuses_a_sign_in_without_a_csrf_token(personas) -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post(reverse("login"), {"username": "operator", "password": PASSWORD})
    assert response.status_code == 403
    assert "_auth_user_id" not in client.session


def test_it_accepts_the_htmx_csrf_header_the_pages_send(client_for) -> None:
    """Pages carry the token in ``hx-headers`` so htmx POSTs pass; the header form is accepted."""
    client = client_for("operator", enforce_csrf_checks=True)
    page = client.get(reverse("review:runs")).content.decode()
    match = re.search(r"""hx-headers='\{"X-CSRFToken": "([A-Za-z0-9]+)"\}'""", page)
    assert match, "the page body carries the CSRF token for htmx"
    response = client.post(reverse("logout"), headers={"X-CSRFToken": match.group(1)})
    assert response.status_code == 302


@pytest.mark.parametrize("name", ["review:runs", "review:trace", "review:health"])
def test_it_rejects_posts_to_dashboard_pages_without_a_token_before_the_view_runs(
    client_for, name: str
) -> None:
    response = client_for("admin", enforce_csrf_checks=True).post(reverse(name))
    assert response.status_code == 403
