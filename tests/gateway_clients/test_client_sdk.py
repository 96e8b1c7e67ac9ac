"""The client SDK against a live web process: an operator starts a run and issues a token, an agent
reads, writes once per call, waits for an approval as a value, and meets each refusal as a typed
exception (DESIGN.md section 5.13)."""

from __future__ import annotations

import subprocess
import sys
import threading

import anyio
import pytest
from django.db import connections
from ratchet_client import (
    ApprovalWaitTimeout,
    AsyncClient,
    CallConflict,
    Client,
    PolicyRefused,
    TokenInvalid,
    TokenMissing,
    TokenScope,
    TransportError,
)

from runtime.decisions.amendments import approval_amend, proposed_arguments
from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.decisions.denials import approval_deny
from runtime.gateway.operator_credentials import credential_issue
from runtime.models import ReviewCase, Run
from tests.gateway.support import effects_by_key
from tests.gateway_clients.conftest import PUBLIC, agent_run, effects, web_kill, web_start

RISKY = {"path": "config/limits.toml", "content": "max = 3\n"}


def _grant(run_id: str) -> None:
    [item] = approvals_waiting(run_ids=[run_id])
    approval_grant(run_id=run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)


def test_the_sdk_imports_nothing_of_django_or_celery() -> None:
    probe = ("import sys, ratchet_client; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'celery', 'runtime')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env={
        "PATH": "/usr/bin:/bin"}).stdout.strip()
    assert out == "[]"


def test_an_operator_and_an_agent_drive_a_run_with_the_sync_client(web) -> None:
    operator = Client(web.base_url, operator_credential=credential_issue(tenant_id="default").credential)
    started = operator.start_run("task")
    assert started.phase == "running" and started.dashboard_url == f"{PUBLIC}/runs/{started.run_id}/"
    issued = operator.issue_token(run_id=started.run_id, agent="sdk-agent")
    run_id = started.run_id
    with Client(web.base_url, token=issued.token) as agent:
        assert [t.name for t in agent.run(run_id).tools] == ["write_file", "delete_file", "finish"]
        assert [r.run_id for r in agent.runs()] == [run_id]
        with pytest.raises(TokenMissing):
            agent.start_run("task")  # an agent client holds no operator credential: nothing is sent

        first = agent.call(run_id, "write_file", {"path": "notes/a.txt", "content": "a\n"})
        again = agent.call(run_id, "write_file", {"path": "notes/a.txt", "content": "a\n"})
        assert first.executed and first.call_id.startswith("d-") and not first.repeated
        assert again.repeated and again.receipt == first.receipt
        assert agent.read_file(run_id, "notes/a.txt").content == "a\n"
        assert [e.path for e in agent.list_directory(run_id, "notes").entries] == ["notes/a.txt"]

        named = agent.call(run_id, "write_file", {"path": "notes/b.txt", "content": "b\n"}, call_id="step-1")
        with pytest.raises(CallConflict) as conflict:
            agent.call(run_id, "write_file", {"path": "notes/c.txt", "content": "c\n"}, call_id="step-1")
        assert conflict.value.context["executed"] is True and not conflict.value.retryable
        with pytest.raises(PolicyRefused):
            agent.call(run_id, "write_file", {"path": "elsewhere/x.txt", "content": "x"})

        waiting = agent.call(run_id, "write_file", RISKY, call_id="risky")
        assert waiting.waiting_for_approval and waiting.approval_url == f"{PUBLIC}/runs/{run_id}/"
        blocked = agent.call(run_id, "write_file", {"path": "notes/d.txt", "content": "d\n"})
        assert blocked.waiting_for_approval, "another call's approval is a value to wait on, not an error"
        assert agent.pending_approval(run_id).call_id == "risky"
        with pytest.raises(ApprovalWaitTimeout):
            waiting.wait_for_approval(timeout=0.5, poll_seconds=0.1)

        results = {}
        waiter = threading.Thread(target=lambda: results.update(done=waiting.wait_for_approval(
            timeout=120, poll_seconds=0.2)))
        waiter.start()
        _grant(run_id)
        waiter.join(timeout=150)
        done = results["done"]
        assert done.executed and done.call_id == "risky"
        assert blocked.wait_for_approval(timeout=60, poll_seconds=0.2).executed
        receipts = agent.receipts(run_id)
        assert [r.call_id for r in receipts] == [first.call_id, "step-1", "risky", blocked.call_id]
        assert agent.call_record(run_id, "step-1").receipt == named.receipt

        assert operator.revoke_token(issued.token_id) is True
        with pytest.raises(TokenInvalid):
            agent.run(run_id)
    with pytest.raises(TokenScope):
        Client(web.base_url, operator_credential=credential_issue(tenant_id="elsewhere").credential).cancel_run(run_id)
    assert operator.cancel_run(run_id) in ("running", "cancelled")
    assert Run.objects.get(run_id=run_id).phase in ("running", "cancelled")
    assert not ReviewCase.objects.filter(run_id=run_id).exists(), "nothing was frozen for review"
    assert sorted(effects_by_key(web.workspace / run_id if (web.workspace / run_id).is_dir() else web.workspace)
                  .values()) == [1, 1, 1, 1]
    operator.close()


def test_the_async_client_and_a_killed_web_process(web) -> None:
    credential = credential_issue(tenant_id="default").credential

    async def story() -> tuple[str, str]:
        async with AsyncClient(web.base_url, operator_credential=credential) as operator:
            run = await operator.start_run("task")
            issued = await operator.issue_token(run_id=run.run_id)
        async with AsyncClient(web.base_url, token=issued.token) as agent:
            wrote = await agent.call(run.run_id, "write_file", {"path": "notes/x.txt", "content": "x\n"})
            assert wrote.executed
            waiting = await agent.call(run.run_id, "write_file", RISKY)
            assert waiting.waiting_for_approval
            with pytest.raises(ApprovalWaitTimeout):
                await waiting.wait_for_approval(timeout=0.3, poll_seconds=0.1)
        return run.run_id, issued.token

    run_id, token = anyio.run(story)
    web_kill(web.proc)  # SIGKILL: the SDK says no answer came, retryable
    with Client(web.base_url, token=token, timeout=5) as agent, pytest.raises(TransportError) as gone:
        agent.run(run_id)
    assert gone.value.retryable
    web.proc = web_start(web.port, web.specs)
    _grant(run_id)

    async def resume() -> None:
        async with AsyncClient(web.base_url, token=token) as agent:
            done = await (await agent.call(run_id, "write_file", RISKY)).wait_for_approval(timeout=60)
            assert done.executed
            assert (await agent.call(run_id, "write_file", RISKY)).repeated
            finished = await agent.finish(run_id, "done")
            assert finished.status == "finished"

    anyio.run(resume)
    assert Run.objects.get(run_id=run_id).phase == "completed"
    workspace = web.workspace / run_id if (web.workspace / run_id).is_dir() else web.workspace
    assert sorted(effects_by_key(workspace).values()) == [1, 1], "one effect per call across the kill"


def _deny_continue(run_id: str, reason: str) -> None:
    """A person denies the waiting write and lets the run go on (its connection closed after: a thread may call it)."""
    try:
        [item] = approvals_waiting(run_ids=[run_id])
        approval_deny(run_id=run_id, approver="olivia", reason=reason, mode="continue",
                      intent_digest=item.intent_digest, environment_fingerprint=item.environment_fingerprint)
    finally:
        connections.close_all()


def test_denied_and_amended_calls_read_from_the_gateways_answers(web) -> None:
    run = agent_run(web)
    with Client(web.base_url, token=run.token) as agent:
        waiting = agent.call(run.run_id, "write_file", RISKY, call_id="risky-sync")
        assert waiting.waiting_for_approval and not waiting.denied
        _deny_continue(run.run_id, "limits are owned by finance")
        denied = waiting.wait_for_approval(timeout=60, poll_seconds=0.1)
        assert denied.denied and not denied.executed and denied.call_id == "risky-sync"
        assert denied.detail == "denied by olivia: limits are owned by finance"
        assert denied.result.denial["reason"] == "limits are owned by finance"
        assert denied.result.denial["approver"] == "olivia" and denied.result.amended is None

    async def denied_async() -> tuple[bool, bool, dict]:
        async with AsyncClient(web.base_url, token=run.token) as client:
            pending = await client.call(run.run_id, "write_file", RISKY, call_id="risky-async")
            await anyio.to_thread.run_sync(_deny_continue, run.run_id, "not this week")
            done = await pending.wait_for_approval(timeout=60, poll_seconds=0.1)
            return pending.denied, done.denied, done.result.denial

    was_denied, now_denied, denial = anyio.run(denied_async)
    assert (was_denied, now_denied) == (False, True) and denial["reason"] == "not this week"

    with Client(web.base_url, token=run.token) as agent:
        waiting = agent.call(run.run_id, "write_file", RISKY, call_id="risky-amended")
        [item] = approvals_waiting(run_ids=[run.run_id])
        _, arguments = proposed_arguments(run_id=run.run_id)
        approval_amend(run_id=run.run_id, approver="olivia", arguments={**arguments, "content": "max = 4\n"},
                       proposed_intent_digest=item.intent_digest,
                       environment_fingerprint=item.environment_fingerprint, note="four is the limit")
        done = waiting.wait_for_approval(timeout=60, poll_seconds=0.1)
        assert done.executed and not done.denied and done.result.denial is None
        assert (done.result.amended["amended_by"], done.result.amended["note"]) == ("olivia", "four is the limit")
        assert done.result.amended["proposed_intent_digest"] == waiting.intent_digest
        assert done.result.amended["executed_intent_digest"] == done.intent_digest != waiting.intent_digest
        assert [r.call_id for r in agent.receipts(run.run_id)] == ["risky-amended"]
    workspace = web.workspace / run.run_id if (web.workspace / run.run_id).is_dir() else web.workspace
    assert (workspace / RISKY["path"]).read_text() == "max = 4\n"
    assert list(effects(web, run.run_id).values()) == [1], "the denied writes never ran"
