"""Story: malformed requests to the JSON API get the gateway's typed JSON error (N10).

Before: a non-numeric ``Content-Length`` answered an HTML 500, and a call id holding ``%2F``
answered the dashboard's HTML 404. Now both are ``{"error": {...}}`` with a code an agent can act
on, and nothing is recorded.
"""

from __future__ import annotations

import json

import pytest

from runtime.models import Run
from tests.gateway.test_api import NOTE

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("length", ["abc", "-5", "1e3", "99999999999999999999999"])
def test_n10_it_answers_a_non_numeric_content_length_with_a_typed_error(client, gw, length):
    generation = Run.objects.get(run_id=gw.run_id).generation

    response = client.generic("POST", f"/api/v1/runs/{gw.run_id}/calls", json.dumps(NOTE),
                              content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {gw.token}",
                              CONTENT_LENGTH=length)

    assert response.status_code == 400 and response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == "malformed_request"
    assert Run.objects.get(run_id=gw.run_id).generation == generation
    assert gw.effects() == {}


@pytest.mark.parametrize("path", ["runs/{run}/calls/a%2Fb", "runs/{run}/calls/a/b", "no/such/endpoint"])
def test_n10_it_answers_an_unknown_api_path_with_the_gateways_json_404(client, gw, path):
    response = client.get("/api/v1/" + path.format(run=gw.run_id), HTTP_AUTHORIZATION=f"Bearer {gw.token}")

    assert response.status_code == 404 and response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == "not_found" and "%2F" in error["hint"]
    assert gw.token.split("_", 2)[2] not in response.content.decode()
