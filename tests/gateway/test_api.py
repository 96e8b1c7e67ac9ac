"""The JSON API: bearer tokens only, typed errors that change nothing, an OpenAPI description."""

import json

import pytest
from django.contrib.auth import get_user_model

from runtime.engine import run_start
from runtime.gateway.tokens import token_issue, token_revoke
from runtime.models import Run
from tests.gateway.support import write_external_task

pytestmark = pytest.mark.django_db(transaction=True)

NOTE = {"call_id": "c1", "tool": "write_file", "arguments": {"path": "notes/a.txt", "content": "hi\n"}}


def post(client, run_id, body, token, **extra):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(f"/api/v1/runs/{run_id}/calls", data=data, content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {token}", **extra)


def test_it_executes_a_call_and_repeats_the_receipt(client, gw):
    first = post(client, gw.run_id, NOTE, gw.token)
    assert first.status_code == 200, first.content
    assert first.json()["status"] == "executed"
    again = post(client, gw.run_id, NOTE, gw.token).json()
    assert again["repeated"] is True and again["receipt"] == first.json()["receipt"]
    assert list(gw.effects().values()) == [1]
    got = client.get(f"/api/v1/runs/{gw.run_id}/calls/c1", HTTP_AUTHORIZATION=f"Bearer {gw.token}").json()
    assert got["status"] == "executed" and got["receipt"] == first.json()["receipt"]
    [receipt] = client.get(f"/api/v1/runs/{gw.run_id}/receipts", HTTP_AUTHORIZATION=f"Bearer {gw.token}").json()
    assert receipt["call_id"] == "c1"


def test_it_lists_the_runs_tools_with_schemas(client, gw):
    body = client.get(f"/api/v1/runs/{gw.run_id}", HTTP_AUTHORIZATION=f"Bearer {gw.token}").json()
    names = {t["name"] for t in body["tools"]}
    assert names == {"write_file", "delete_file", "finish"}
    [write] = [t for t in body["tools"] if t["name"] == "write_file"]
    assert set(write["input_schema"]["required"]) == {"path", "content"}


def test_it_serves_an_openapi_description(client):
    spec = client.get("/api/v1/openapi.json").json()
    assert "/api/v1/runs/{run_id}/calls" in spec["paths"]


@pytest.mark.parametrize(("body", "status", "code"), [
    ("{not json", 400, "malformed_json"),
    ({"tool": "write_file", "arguments": {}}, 422, "invalid_input"),
    ({"call_id": "c1", "tool": "rm_rf", "arguments": {}}, 422, "unknown_action"),
    ({"call_id": "c1", "tool": "write_file", "arguments": {"path": "notes/a.txt"}}, 422, "invalid_input"),
    ({"call_id": "c1", "tool": "write_file", "arguments": {"path": "etc/passwd", "content": "x"}}, 403,
     "policy_refused"),
])
def test_it_answers_bad_input_with_a_typed_error_and_changes_nothing(client, gw, body, status, code):
    generation = Run.objects.get(run_id=gw.run_id).generation
    response = post(client, gw.run_id, body, gw.token)
    assert response.status_code == status, response.content
    assert response.json()["error"]["code"] == code
    assert Run.objects.get(run_id=gw.run_id).generation == generation
    assert gw.effects() == {}


def test_it_refuses_an_oversized_body_before_reading_it(client, gw, settings):
    settings.RATCHET_GATEWAY_MAX_BYTES = 100
    big = {**NOTE, "arguments": {"path": "notes/a.txt", "content": "x" * 10_000}}
    response = post(client, gw.run_id, big, gw.token)
    assert response.status_code == 413 and response.json()["error"]["code"] == "payload_too_large"
    assert gw.effects() == {}


def test_it_refuses_a_repeated_call_id_with_other_arguments(client, gw):
    post(client, gw.run_id, NOTE, gw.token)
    other = {**NOTE, "arguments": {"path": "notes/a.txt", "content": "other\n"}}
    response = post(client, gw.run_id, other, gw.token)
    assert response.status_code == 409 and response.json()["error"]["code"] == "call_conflict"
    assert (gw.workspace / "notes/a.txt").read_text() == "hi\n"


def test_a_token_for_run_a_cannot_touch_run_b(client, gw, tmp_path):
    other_run = run_start(spec_path=write_external_task(tmp_path / "b"), worker="starter")
    assert post(client, other_run, NOTE, gw.token).status_code == 403
    for path in (f"/api/v1/runs/{other_run}", f"/api/v1/runs/{other_run}/receipts",
                 f"/api/v1/runs/{other_run}/calls/c1"):
        response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {gw.token}")
        assert response.status_code == 403 and response.json()["error"]["code"] == "token_scope"
    assert Run.objects.get(run_id=other_run).generation == 1


def test_a_revoked_token_is_refused_at_once(client, gw):
    assert post(client, gw.run_id, NOTE, gw.token).status_code == 200
    token_revoke(token_id=gw.token_id)
    response = post(client, gw.run_id, {**NOTE, "call_id": "c2"}, gw.token)
    assert response.status_code == 401 and response.json()["error"]["code"] == "token_invalid"


def test_the_dashboard_session_never_authorises_the_api(client, gw):
    user = get_user_model().objects.create_superuser("root", "root@example.org", "pw-for-tests-only")
    client.force_login(user)
    response = client.post(f"/api/v1/runs/{gw.run_id}/calls", data=json.dumps(NOTE),
                           content_type="application/json")
    assert response.status_code == 401
    assert gw.effects() == {}


def test_a_gateway_token_never_opens_the_dashboard(client, gw):
    response = client.get(f"/runs/{gw.run_id}/", HTTP_AUTHORIZATION=f"Bearer {gw.token}")
    assert response.status_code in (302, 403)


def test_it_rate_limits_a_flood_per_token(client, gw, settings, tmp_path):
    settings.RATCHET_GATEWAY_RATE_LIMIT = 3
    codes = [client.get(f"/api/v1/runs/{gw.run_id}", HTTP_AUTHORIZATION=f"Bearer {gw.token}").status_code
             for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    limited = client.get(f"/api/v1/runs/{gw.run_id}", HTTP_AUTHORIZATION=f"Bearer {gw.token}").json()
    assert limited["error"]["code"] == "rate_limited" and limited["error"]["retryable"] is True
    fresh = token_issue(run_id=gw.run_id).token  # the limit is per token
    assert client.get(f"/api/v1/runs/{gw.run_id}", HTTP_AUTHORIZATION=f"Bearer {fresh}").status_code == 200


def test_no_token_appears_in_errors_logs_or_trace(client, gw, caplog):
    from runtime.models import TraceEvent

    secret = gw.token.split("_", 2)[2]
    post(client, gw.run_id, NOTE, gw.token)
    bad = post(client, gw.run_id, {**NOTE, "tool": "nope"}, gw.token)
    wrong = post(client, gw.run_id, NOTE, gw.token + "x")
    for response in (bad, wrong):
        assert secret not in response.content.decode()
    assert secret not in caplog.text
    for event in TraceEvent.objects.filter(run_id=gw.run_id):
        assert secret not in json.dumps(event.payload)


def test_an_agent_token_lists_and_drives_its_tenants_runs_only(client, gw, tmp_path):
    from runtime.gateway.tokens import token_issue_agent

    mine = run_start(spec_path=write_external_task(tmp_path / "mine"), worker="starter", tenant_id="tenant-a")
    theirs = run_start(spec_path=write_external_task(tmp_path / "theirs"), worker="starter", tenant_id="tenant-b")
    issued = token_issue_agent(tenant_id="tenant-a", agent="bot", task_id="gateway-story")
    listed = client.get("/api/v1/runs", HTTP_AUTHORIZATION=f"Bearer {issued.token}").json()
    assert [r["run_id"] for r in listed] == [mine]
    assert post(client, mine, NOTE, issued.token).status_code == 200
    refused = post(client, theirs, NOTE, issued.token)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "token_scope"
    assert issued.token not in refused.content.decode()


def test_a_request_without_a_token_is_told_to_send_one(client, gw):
    for headers in ({}, {"HTTP_AUTHORIZATION": "Basic abc"}, {"HTTP_AUTHORIZATION": "Bearer "}):
        response = client.post(f"/api/v1/runs/{gw.run_id}/calls", data=json.dumps(NOTE),
                               content_type="application/json", **headers)
        error = response.json()["error"]
        assert response.status_code == 401 and error["code"] == "token_missing", headers
        assert error["message"] == "no token: send Authorization: Bearer <gateway token>"
    unknown = post(client, gw.run_id, NOTE, "rgw_0000_not-a-secret")
    assert unknown.status_code == 401 and unknown.json()["error"]["code"] == "token_invalid"
    assert gw.effects() == {}


def test_the_openapi_description_gives_the_call_results_fields(client):
    spec = client.get("/api/v1/openapi.json").json()
    ok = spec["paths"]["/api/v1/runs/{run_id}/calls"]["post"]["responses"]["200"]["content"]["application/json"]
    name = ok["schema"]["$ref"].rsplit("/", 1)[1]
    result = spec["components"]["schemas"][name]
    assert result["properties"]["status"]["enum"] == ["executed", "waiting_for_approval", "finished", "denied"]
    assert {"receipt", "idempotency_key", "approval_url", "repeated", "denial"} <= set(result["properties"])
    assert "repeating it never repeats the effect" in result["properties"]["call_id"]["description"]
