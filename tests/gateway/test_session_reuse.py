"""Story: the gateway restores a run once and reuses the session while nothing else touches the run.

Counted at ``session_open`` (the full restore: spec, plug-in pins, adapter binding, checkpoint and
ledger verification, environment recovery). Another lease holder in between, or a call that
failed half-way, makes the next call restore again; every call still executes exactly once.
"""

from __future__ import annotations

import pytest

import runtime.engine.advance as advance
from runtime.engine import run_advance
from runtime.errors import GatewayRunBusyError, LeaseLostError
from runtime.gateway.calls import call_submit

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def restores(monkeypatch) -> list[str]:
    opened: list[str] = []
    real = advance.session_open

    def counting(**kwargs):
        opened.append(kwargs["run_id"])
        return real(**kwargs)

    monkeypatch.setattr(advance, "session_open", counting)
    return opened


def _note(gw, i: int):
    return call_submit(run_id=gw.run_id, call_id=f"n{i}", tool="write_file",
                       arguments={"path": f"notes/{i}.txt", "content": f"note {i}\n"}, token=gw.token)


def test_it_restores_a_run_once_while_nothing_else_touches_it(gw, restores):
    results = [_note(gw, i) for i in range(3)]
    assert [r.status for r in results] == ["executed"] * 3
    assert restores == [gw.run_id]
    assert gw.effects() == {r.idempotency_key: 1 for r in results}


def test_it_restores_again_after_another_worker_held_the_run(gw, restores):
    first = _note(gw, 0)
    # The gateway keeps the lease warm for RATCHET_GATEWAY_IDLE_SECONDS after a call: the sweeper
    # waits for it, then takes and releases the lease (a new fencing token).
    run_advance(run_id=gw.run_id, worker="sweeper", wait_seconds=30)
    second = _note(gw, 1)
    assert restores == [gw.run_id, gw.run_id, gw.run_id]  # ours, the sweeper's, ours again
    assert gw.effects() == {first.idempotency_key: 1, second.idempotency_key: 1}


def test_it_restores_again_after_a_call_failed_half_way(gw, restores, monkeypatch):
    first = _note(gw, 0)
    real_step = advance.run_step

    def lost(session):
        monkeypatch.setattr(advance, "run_step", real_step)  # once
        raise LeaseLostError("taken over in the story", run_id=session.run_id)

    monkeypatch.setattr(advance, "run_step", lost)
    with pytest.raises(GatewayRunBusyError):
        _note(gw, 1)
    again = _note(gw, 1)
    assert again.status == "executed" and restores == [gw.run_id, gw.run_id]
    assert gw.effects() == {first.idempotency_key: 1, again.idempotency_key: 1}


def test_it_restores_every_call_when_reuse_is_off(gw, restores, settings):
    settings.RATCHET_GATEWAY_REUSE_SESSIONS = False
    for i in range(2):
        _note(gw, i)
    assert restores == [gw.run_id, gw.run_id]
