"""Authorization matrix of the JSON API: every endpoint x every kind of caller gets the right status,
and an operator credential starts and cancels runs and issues and revokes tokens in its tenant
only (DESIGN.md sections 5.12 and 5.13)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from runtime.api.v1 import api
from runtime.engine import run_start
from runtime.gateway.operator_credentials import credential_issue, credential_revoke
from runtime.gateway.tokens import token_issue
from runtime.models import GatewayToken, Run
from tests.gateway.support import write_external_task

pytestmark = pytest.mark.django_db(transaction=True)

PERSONAS = ("anonymous", "revoked_operator", "agent", "other_operator", "operator")
"""Callers, in the order each endpoint is tried: the one that succeeds last, so nothing before it
sees its change."""

AGENT = {"anonymous": 401, "revoked_operator": 401, "agent": 200, "other_operator": 401, "operator": 401}
OPERATOR_READ = {"anonymous": 401, "revoked_operator": 401, "agent": 401, "other_operator": 403, "operator": 200}
OPERATOR_CHANGE = {**OPERATOR_READ, "operator": 200}
OPERATOR_CREATE = {**OPERATOR_READ, "operator": 201}

# (method, path in the OpenAPI description) -> expected status per persona
MATRIX: dict[tuple[str, str], dict[str, int]] = {
    ("get", "/api/v1/runs"): AGENT,
    ("get", "/api/v1/runs/{run_id}"): AGENT,
    ("post", "/api/v1/runs/{run_id}/calls"): AGENT,
    ("get", "/api/v1/runs/{run_id}/calls/{call_id}"): AGENT,
    ("get", "/api/v1/runs/{run_id}/receipts"): AGENT,
    ("get", "/api/v1/runs/{run_id}/approval"): AGENT,
    ("get", "/api/v1/runs/{run_id}/files"): AGENT,
    ("get", "/api/v1/runs/{run_id}/file"): AGENT,
    # Another tenant's operator starts a run in its own tenant: its spec is there too.
    ("post", "/api/v1/operator/runs"): {**OPERATOR_CREATE, "other_operator": 201},
    ("get", "/api/v1/operator/runs/{run_id}"): OPERATOR_READ,
    ("post", "/api/v1/operator/runs/{run_id}/cancel"): OPERATOR_CHANGE,
    ("post", "/api/v1/operator/tokens"): OPERATOR_CREATE,
    ("delete", "/api/v1/operator/tokens/{token_id}"): OPERATOR_CHANGE,
}


@dataclass
class Story:
    run_id: str
    spare_token_id: str
    bearer: dict[str, str | None]


@pytest.fixture
def story(tmp_path: Path, ratchet_keys, settings) -> Story:
    spec = write_external_task(tmp_path)
    settings.RATCHET_API_TASK_SPECS_DIR = str(tmp_path)
    run_id = run_start(spec_path=spec, worker="starter")
    tenant = Run.objects.get(run_id=run_id).tenant_id
    revoked = credential_issue(tenant_id=tenant, name="old")
    credential_revoke(credential_id=revoked.credential_id)
    return Story(run_id=run_id, spare_token_id=token_issue(run_id=run_id, agent="spare").token_id, bearer={
        "anonymous": None, "agent": token_issue(run_id=run_id, agent="matrix").token,
        "operator": credential_issue(tenant_id=tenant, name="ops").credential,
        "other_operator": credential_issue(tenant_id="elsewhere", name="theirs").credential,
        "revoked_operator": revoked.credential})


def _request(client, method: str, path: str, story: Story, bearer: str | None):
    url = (path.replace("{run_id}", story.run_id).replace("{call_id}", "c1")
           .replace("{token_id}", story.spare_token_id))
    body = {"post /api/v1/runs/{run_id}/calls": {"tool": "write_file", "arguments": {"path": "notes/a.txt",
                                                                                     "content": "a\n"}},
            "post /api/v1/operator/runs": {"task": "task"},
            "post /api/v1/operator/tokens": {"run_id": story.run_id, "agent": "new"}}.get(f"{method} {path}")
    query = {"path": "notes"} if path.endswith("/files") else {"path": "README.md"} if path.endswith("/file") else {}
    headers = {"HTTP_AUTHORIZATION": f"Bearer {bearer}"} if bearer else {}
    if method == "get":
        return client.get(url, query, **headers)
    return getattr(client, method)(url, data=json.dumps(body or {}), content_type="application/json", **headers)


def test_every_api_endpoint_is_in_the_matrix() -> None:
    described = {(method, path) for path, ops in api.get_openapi_schema(path_prefix="/api/v1")["paths"].items()
                 for method in ops}
    assert described == set(MATRIX), "add new API endpoints to MATRIX with their expected status codes"


@pytest.mark.parametrize(("method", "path"), sorted(MATRIX))
def test_each_kind_of_caller_gets_the_right_status_for_each_endpoint(client, story, method, path) -> None:
    (story_ws := Path(Run.objects.get(run_id=story.run_id).spec["target"]) / "notes").mkdir(exist_ok=True)
    assert story_ws.is_dir()
    for persona in PERSONAS:
        response = _request(client, method, path, story, story.bearer[persona])
        assert response.status_code == MATRIX[(method, path)][persona], (persona, response.content[:300])
        if response.status_code >= 400:
            assert set(response.json()["error"]) == {"code", "message", "hint", "retryable", "context"}
            for secret in filter(None, story.bearer.values()):
                assert secret.split("_", 2)[2] not in response.content.decode(), "no credential is echoed"


def test_an_operator_starts_a_run_issues_a_token_the_agent_uses_then_revokes_it_and_cancels(client, story):
    ops = {"HTTP_AUTHORIZATION": f"Bearer {story.bearer['operator']}"}
    started = client.post("/api/v1/operator/runs", data={"task": "task"}, content_type="application/json", **ops)
    assert started.status_code == 201, started.content
    run_id = started.json()["run_id"]
    assert started.json()["dashboard_url"] == f"http://localhost:8000/runs/{run_id}/"
    issued = client.post("/api/v1/operator/tokens", data={"run_id": run_id, "agent": "bot"},
                         content_type="application/json", **ops).json()
    assert issued["token"].startswith(f"rgw_{issued['token_id']}_")
    assert issued["token"] not in json.dumps(list(GatewayToken.objects.values()), default=str), "never stored"
    agent = {"HTTP_AUTHORIZATION": f"Bearer {issued['token']}"}
    call = client.post(f"/api/v1/runs/{run_id}/calls", data={"tool": "write_file", "arguments": {
        "path": "notes/x.txt", "content": "x\n"}}, content_type="application/json", **agent)
    assert call.json()["status"] == "executed"
    revoked = client.delete(f"/api/v1/operator/tokens/{issued['token_id']}", **ops)
    assert revoked.json() == {"token_id": issued["token_id"], "revoked": True, "run_id": None, "phase": None}
    assert client.get(f"/api/v1/runs/{run_id}", **agent).status_code == 401
    cancelled = client.post(f"/api/v1/operator/runs/{run_id}/cancel", **ops)
    assert cancelled.status_code == 200 and cancelled.json()["revoked"] is True


def test_runs_are_not_started_through_the_api_without_a_folder_of_specs(client, story, settings):
    settings.RATCHET_API_TASK_SPECS_DIR = ""
    ops = {"HTTP_AUTHORIZATION": f"Bearer {story.bearer['operator']}"}
    refused = client.post("/api/v1/operator/runs", data={"task": "task"}, content_type="application/json", **ops)
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "runs_not_enabled"
    settings.RATCHET_API_TASK_SPECS_DIR = str(Path(Run.objects.get(run_id=story.run_id).spec["base_dir"]))
    for name in ("../task", "task/../../etc", ".hidden", "nope"):
        answer = client.post("/api/v1/operator/runs", data={"task": name}, content_type="application/json", **ops)
        assert answer.status_code == 422, name


def test_the_command_issues_a_credential_once_and_revokes_it(capsys) -> None:
    call_command("operator_credentials", "issue", "acme", "--name", "ci")
    credential = capsys.readouterr().out.strip()
    assert credential.startswith("rop_")
    credential_id = credential[4:].partition("_")[0]
    call_command("operator_credentials", "revoke", credential_id)
    assert f"revoked {credential_id}" in capsys.readouterr().out


def test_the_docs_page_is_served_and_authorises_nothing(client, story) -> None:
    page = client.get("/api/v1/docs")
    assert page.status_code == 200 and b"swagger" in page.content.lower()
    assert b"cdn.jsdelivr" not in page.content, "Swagger UI comes from this process's static files"
    user = get_user_model().objects.create_user("olivia", password="pw-olivia-123")
    client.force_login(user)
    assert client.get(f"/api/v1/runs/{story.run_id}").status_code == 401, "a dashboard session authorises nothing"
    assert client.get("/api/v1/operator/runs/" + story.run_id).status_code == 401
