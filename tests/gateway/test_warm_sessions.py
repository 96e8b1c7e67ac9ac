"""The gateway's hot path (DESIGN.md section 5.12, "Cost of a call"): a run's lease stays warm
between calls and goes back when its calls pause; the token's count rides in the call's first
commit, so admission costs no transaction of its own; a repeated call id costs reads only."""

from __future__ import annotations

import time

import pytest

from runtime.bench.counting import DatabaseCounter
from runtime.errors import GatewayRateLimitedError, GatewayTokenError
from runtime.gateway import calls as gateway_calls
from runtime.gateway import rate_limits
from runtime.gateway.calls import call_submit
from runtime.gateway.tokens import token_issue, token_revoke
from runtime.models import GatewayToken, Run, TraceEvent

pytestmark = pytest.mark.django_db(transaction=True)


def _note(gw, i: int, *, token: str | None = None, call_id: str | None = None):
    return call_submit(run_id=gw.run_id, call_id=call_id or f"n{i}", tool="write_file",
                       arguments={"path": f"notes/{i}.txt", "content": f"note {i}\n"}, token=token or gw.token)


def _events(run_id: str, event_type: str) -> int:
    return TraceEvent.objects.filter(run_id=run_id, event_type=event_type).count()


def _holder(run_id: str) -> str:
    return Run.objects.filter(run_id=run_id).values_list("owner_worker", flat=True).get()


def _until(condition, *, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not come true in time")
        time.sleep(0.05)


def test_calls_that_keep_coming_take_the_lease_once(gw, settings):
    settings.RATCHET_GATEWAY_IDLE_SECONDS = 30.0
    results = [_note(gw, i) for i in range(4)]
    assert [r.status for r in results] == ["executed"] * 4
    assert _events(gw.run_id, "lease.acquired") == 2  # the starter's, then the gateway's once
    assert _events(gw.run_id, "lease.released") == 1  # the starter's only: the gateway still holds it
    assert "/gateway-" in _holder(gw.run_id)
    assert gw.effects() == {r.idempotency_key: 1 for r in results}


def test_the_lease_goes_back_once_the_calls_pause(gw, settings):
    settings.RATCHET_GATEWAY_IDLE_SECONDS = 0.3
    first = _note(gw, 0)
    _until(lambda: _holder(gw.run_id) == "")
    assert _events(gw.run_id, "lease.released") == 2
    second = _note(gw, 1)  # under a new lease, reusing the restored session
    assert gw.effects() == {first.idempotency_key: 1, second.idempotency_key: 1}


def test_a_run_that_waits_for_a_person_gives_the_lease_back_at_once(gw, settings):
    settings.RATCHET_GATEWAY_IDLE_SECONDS = 30.0
    waiting = call_submit(run_id=gw.run_id, call_id="cfg", tool="write_file",
                          arguments={"path": "config/app.toml", "content": "x = 1\n"}, token=gw.token)
    assert waiting.status == "waiting_for_approval"
    assert _holder(gw.run_id) == ""  # an approver never waits for the gateway


def test_the_hold_is_bounded_however_fast_calls_come(gw, settings):
    settings.RATCHET_GATEWAY_IDLE_SECONDS = 30.0
    settings.RATCHET_GATEWAY_HOLD_SECONDS = 0.2
    results = [_note(gw, i) for i in range(2)]
    _until(lambda: _holder(gw.run_id) == "")  # the bound, long before the idle time
    # Calls that never pause (the run's budget allows 50): the lease still goes back by the bound.
    while _events(gw.run_id, "lease.released") < 3 and len(results) < 45:
        results.append(_note(gw, len(results)))
    assert _events(gw.run_id, "lease.released") >= 3  # the starter's, then twice by the bound
    assert gw.effects() == {r.idempotency_key: 1 for r in results}


def test_a_call_is_counted_once_by_its_own_commit_and_a_repeat_not_at_all(gw, settings):
    settings.RATCHET_GATEWAY_IDLE_SECONDS = 30.0
    calls = lambda: GatewayToken.objects.get(token_id=gw.token_id).window_calls  # noqa: E731
    _note(gw, 0)
    assert calls() == 1
    _note(gw, 1)
    assert calls() == 2
    repeated = _note(gw, 1)
    assert repeated.repeated and calls() == 2


def test_admission_costs_a_warm_call_no_transaction_of_its_own(gw, settings):
    settings.RATCHET_GATEWAY_IDLE_SECONDS = 30.0
    _note(gw, 0)  # takes the lease and restores
    counter = DatabaseCounter()
    with counter.installed():
        before = counter.snapshot()
        _note(gw, 1)
        call = counter.snapshot().minus(before)
        before = counter.snapshot()
        _note(gw, 1)  # the same call id again
        repeat = counter.snapshot().minus(before)
    # The intent and the receipt: each one main-database commit and one move of the mark
    # (DESIGN.md section 4.3); no lease acquisition, release or token transaction.
    assert call.durable_transactions == 4
    assert repeat.durable_transactions == 0 and repeat.statements >= 1


def test_a_token_revoked_after_its_read_is_refused_by_the_commit(gw, settings, monkeypatch):
    settings.RATCHET_GATEWAY_IDLE_SECONDS = 30.0
    first = _note(gw, 0)
    generation = Run.objects.get(run_id=gw.run_id).generation
    read = gateway_calls.token_request_check

    def read_then_revoked(*, token):
        row = read(token=token)
        token_revoke(token_id=row.token_id)  # between the call's read and its first commit
        return row

    with monkeypatch.context() as patched, pytest.raises(GatewayTokenError):
        patched.setattr(gateway_calls, "token_request_check", read_then_revoked)
        _note(gw, 1)
    assert Run.objects.get(run_id=gw.run_id).generation == generation  # nothing committed
    assert _holder(gw.run_id) == ""  # and the lease went back: no run_busy for the next caller
    other = token_issue(run_id=gw.run_id, agent="second")
    second = _note(gw, 1, token=other.token)
    assert second.status == "executed"
    assert gw.effects() == {first.idempotency_key: 1, second.idempotency_key: 1}


def test_a_window_that_filled_after_the_read_is_refused_by_the_commit(gw, settings, monkeypatch):
    settings.RATCHET_GATEWAY_IDLE_SECONDS = 30.0
    settings.RATCHET_GATEWAY_RATE_LIMIT = 2
    _note(gw, 0)
    _note(gw, 1)
    with pytest.raises(GatewayRateLimitedError):
        _note(gw, 2)  # refused by the read, before anything
    generation = Run.objects.get(run_id=gw.run_id).generation
    monkeypatch.setattr("runtime.gateway.tokens.token_window_check", lambda **_: None)
    with pytest.raises(GatewayRateLimitedError) as refused:
        _note(gw, 3)  # the read is blind now: the commit's compare-and-set refuses
    assert refused.value.context["retry_after"] > 0
    assert Run.objects.get(run_id=gw.run_id).generation == generation
    assert GatewayToken.objects.get(token_id=gw.token_id).window_calls == 2
    assert _holder(gw.run_id) == ""


def test_the_count_statement_means_what_the_orm_means(gw, settings):
    """The count is compiled once and refilled (``runtime.database.statements``): run alone it
    counts a fresh window from 1, counts on within it, and refuses a full window and a revoked token."""
    settings.RATCHET_GATEWAY_RATE_LIMIT = 2
    row = lambda: GatewayToken.objects.get(token_id=gw.token_id)  # noqa: E731
    rate_limits.token_count(token_id=gw.token_id)
    started = row().window_started_at
    assert row().window_calls == 1 and started is not None
    rate_limits.token_count(token_id=gw.token_id)
    assert row().window_calls == 2 and row().window_started_at == started
    with pytest.raises(GatewayRateLimitedError):
        rate_limits.token_count(token_id=gw.token_id)
    GatewayToken.objects.filter(token_id=gw.token_id).update(window_started_at=started.replace(year=2000))
    rate_limits.token_count(token_id=gw.token_id)  # the window passed: a new one from 1
    assert row().window_calls == 1 and row().window_started_at > started
    token_revoke(token_id=gw.token_id)
    with pytest.raises(GatewayTokenError):
        rate_limits.token_count(token_id=gw.token_id)
