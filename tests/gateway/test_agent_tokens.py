"""Per-agent tokens: one token for several runs of one tenant, never another tenant's."""

import pytest

from runtime.engine import run_start
from runtime.errors import GatewayScopeError, GatewayTokenError, GatewayTokenScopeInvalidError, RunNotFoundError
from runtime.gateway.calls import call_submit
from runtime.gateway.reads import receipts_list
from runtime.gateway.tokens import token_issue_agent, token_revoke, token_runs, tokens_for_run
from runtime.models import GatewayToken
from tests.gateway.support import write_external_task

pytestmark = pytest.mark.django_db(transaction=True)


def _run(tmp_path, name, tenant):
    return run_start(spec_path=write_external_task(tmp_path / name), worker="starter", tenant_id=tenant)


def _note(run_id, token, call_id="c1"):
    return call_submit(run_id=run_id, call_id=call_id, tool="write_file",
                       arguments={"path": "notes/a.txt", "content": "hi\n"}, token=token)


def test_it_lets_one_agent_token_drive_each_listed_run_of_its_tenant(tmp_path, ratchet_keys):
    a1, a2 = _run(tmp_path, "a1", "tenant-a"), _run(tmp_path, "a2", "tenant-a")
    issued = token_issue_agent(tenant_id="tenant-a", agent="planner-bot", run_ids=[a1, a2])
    assert issued.run_id is None
    assert _note(a1, issued.token).status == "executed"
    assert _note(a2, issued.token).status == "executed"
    assert [r["call_id"] for r in receipts_list(run_id=a2, token=issued.token)] == ["c1"]
    row = GatewayToken.objects.get(token_id=issued.token_id)
    assert sorted(token_runs(row=row)) == sorted([a1, a2])
    assert issued.token not in str(row.__dict__)  # only the digest is stored


def test_it_refuses_an_agent_token_of_tenant_a_on_a_run_of_tenant_b(tmp_path, ratchet_keys):
    a1 = _run(tmp_path, "a1", "tenant-a")
    b1 = _run(tmp_path, "b1", "tenant-b")
    issued = token_issue_agent(tenant_id="tenant-a", agent="bot", task_id="gateway-story")
    assert _note(a1, issued.token).status == "executed"
    with pytest.raises(GatewayScopeError):
        _note(b1, issued.token)  # same task id, other tenant
    with pytest.raises(GatewayScopeError):
        receipts_list(run_id=b1, token=issued.token)
    with pytest.raises(RunNotFoundError):  # a listed run must be the tenant's own
        token_issue_agent(tenant_id="tenant-a", agent="bot", run_ids=[a1, b1])
    row = GatewayToken.objects.get(token_id=issued.token_id)
    assert token_runs(row=row) == [a1]
    assert tokens_for_run(run_id=b1) == []


def test_it_covers_runs_of_its_task_started_later_but_not_unlisted_runs(tmp_path, ratchet_keys):
    a1 = _run(tmp_path, "a1", "tenant-a")
    listed = token_issue_agent(tenant_id="tenant-a", agent="bot", run_ids=[a1])
    by_task = token_issue_agent(tenant_id="tenant-a", agent="bot", task_id="gateway-story")
    a2 = _run(tmp_path, "a2", "tenant-a")
    with pytest.raises(GatewayScopeError):
        _note(a2, listed.token)
    assert _note(a2, by_task.token).status == "executed"
    assert {t.token_id for t in tokens_for_run(run_id=a2)} == {by_task.token_id}


def test_it_refuses_a_revoked_agent_token_on_every_run_at_once(tmp_path, ratchet_keys):
    a1, a2 = _run(tmp_path, "a1", "tenant-a"), _run(tmp_path, "a2", "tenant-a")
    issued = token_issue_agent(tenant_id="tenant-a", agent="bot", run_ids=[a1, a2])
    _note(a1, issued.token)
    assert token_revoke(token_id=issued.token_id)
    for run_id in (a1, a2):
        with pytest.raises(GatewayTokenError):
            _note(run_id, issued.token, call_id="c2")


def test_it_needs_either_runs_or_a_task(tmp_path, ratchet_keys):
    a1 = _run(tmp_path, "a1", "tenant-a")
    with pytest.raises(GatewayTokenScopeInvalidError):
        token_issue_agent(tenant_id="tenant-a", agent="bot")
    with pytest.raises(GatewayTokenScopeInvalidError):
        token_issue_agent(tenant_id="tenant-a", agent="bot", run_ids=[a1], task_id="gateway-story")
