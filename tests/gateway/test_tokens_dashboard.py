"""Operators list and revoke a run's gateway tokens in the dashboard and with the command."""

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from review.roles import roles_sync
from runtime.errors import GatewayTokenError
from runtime.gateway.tokens import token_authorise, token_issue
from runtime.models import GatewayToken

pytestmark = pytest.mark.django_db(transaction=True)


def _client(django_user_model, role: str | None) -> Client:
    roles_sync()
    user = django_user_model.objects.create_user(username=role or "stranger", password="pw-for-tests-only")
    if role:
        user.groups.add(Group.objects.get(name=role))
    client = Client(enforce_csrf_checks=False)
    client.force_login(user)
    return client


def test_an_operator_revokes_a_token_and_the_next_call_is_refused(gw, django_user_model):
    client = _client(django_user_model, "operator")
    url = reverse("review:run-tokens", args=[gw.run_id])
    page = client.get(url)
    assert page.status_code == 200 and gw.token_id in page.content.decode()
    assert gw.token.split("_", 2)[2] not in page.content.decode()
    assert client.post(url, {"token_id": gw.token_id}).status_code == 303
    with pytest.raises(GatewayTokenError):
        token_authorise(token=gw.token, run_id=gw.run_id)


def test_an_operator_issues_a_token_whose_secret_is_shown_once_and_works(gw, django_user_model):
    client = _client(django_user_model, "operator")
    url = reverse("review:run-tokens", args=[gw.run_id])
    page = client.get(url).content.decode()
    assert 'name="intent" value="issue"' in page and 'value="write_file"' in page
    issued = client.post(url, {"intent": "issue", "agent": "from-dashboard", "actions": ["write_file"]})
    assert issued.status_code == 200 and "no-store" in issued["Cache-Control"]
    row = GatewayToken.objects.get(agent="from-dashboard")
    body = issued.content.decode()
    start = body.index(f"rgw_{row.token_id}_")
    token = body[start:body.index("<", start)]
    assert token_authorise(token=token, run_id=gw.run_id).actions == ["write_file"]
    assert token.split("_", 2)[2] not in client.get(url).content.decode(), "shown once, never again"
    refused = client.post(url, {"intent": "issue", "actions": ["format_disk"]})
    assert refused.status_code == 422 and GatewayToken.objects.filter(run_id=gw.run_id).count() == 2


@pytest.mark.parametrize(("role", "status"), [(None, 403), ("reviewer", 403)])
def test_only_operators_reach_the_tokens_page(gw, django_user_model, role, status):
    client = _client(django_user_model, role)
    url = reverse("review:run-tokens", args=[gw.run_id])
    assert client.get(url).status_code == status
    assert client.post(url, {"token_id": gw.token_id}).status_code == status
    assert GatewayToken.objects.get(token_id=gw.token_id).revoked_at is None


def test_the_command_issues_lists_and_revokes(gw, capsys):
    call_command("gateway_tokens", "issue", gw.run_id, "--agent", "cli-agent", "--action", "write_file")
    token = capsys.readouterr().out.strip()
    row = token_authorise(token=token, run_id=gw.run_id)
    assert row.actions == ["write_file"]
    call_command("gateway_tokens", "list", gw.run_id)
    listed = capsys.readouterr().out
    assert row.token_id in listed and token.split("_", 2)[2] not in listed
    call_command("gateway_tokens", "revoke", row.token_id)
    with pytest.raises(GatewayTokenError):
        token_authorise(token=token, run_id=gw.run_id)


def test_a_token_limited_to_an_action_cannot_call_another(gw):
    from runtime.errors import GatewayScopeError
    from runtime.gateway.calls import call_submit

    limited = token_issue(run_id=gw.run_id, actions=["delete_file"]).token
    with pytest.raises(GatewayScopeError):
        call_submit(run_id=gw.run_id, call_id="w", tool="write_file",
                    arguments={"path": "notes/w.txt", "content": "w"}, token=limited)
    assert gw.effects() == {}
