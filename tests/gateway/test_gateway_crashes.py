"""Story: SIGKILL the MCP gateway mid-call, restart it and the client, one effect per call id.

Real processes: ``manage.py gateway`` (streamable HTTP on loopback) killed at an engine crash
point while it executes a tool call (``RATCHET_CRASH_AT``, lease 1 s), and the example MCP client
(``tests/gateway_clients/mcp_agent.py``) that dies with it. Both are started again; the next
call is admitted only after the usual recovery settled the write in flight, and the workspace
adapter's own journal holds exactly one write per call id. Crash points inside the adapter's own
write (``workspace.*``) are in the matrix; SQLite here, and the ``postgres``-marked variant runs
in the PostgreSQL pass (``DATABASE_URL=postgres://...``).
"""

from __future__ import annotations

import random
import subprocess
import sys
import time

import pytest

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.idempotency import derive_key
from runtime.models import Run, TraceEvent
from tests.gateway.support import free_port, gateway_start, gateway_stop
from tests.helpers.procs import ROOT, child_env, events

pytestmark = pytest.mark.django_db(transaction=True)

CLIENT = ROOT / "tests" / "gateway_clients" / "mcp_agent.py"
CALLS = 3


def _client(port: int, token: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CLIENT), "--url", f"http://127.0.0.1:{port}/mcp",
                           "--calls", str(CALLS)], cwd=ROOT, text=True, capture_output=True, timeout=120,
                          env=child_env(RATCHET_GATEWAY_TOKEN=token))


ADAPTER_POINTS = ("workspace.after_prepare:2", "workspace.before_rename:2", "workspace.after_write:2")
"""Crash points inside the workspace adapter's own write (the second write, call ``note-1``)."""


@pytest.mark.parametrize("point", [
    "engine.after_execute:2",  # the quick variant: the effect happened, its receipt was not recorded
    "workspace.after_rename:2",  # inside the adapter: the file is in place, the adapter's journal says nothing
    *(pytest.param(p, marks=pytest.mark.slow) for p in (
        "engine.before_propose:2", "engine.after_intent_commit:2", "engine.before_execute:2",
        "engine.after_receipt_cache:2", "engine.after_step_commit:2", *ADAPTER_POINTS)),
])
def test_it_has_one_effect_per_call_id_after_the_gateway_is_killed_mid_call(gw, point):
    _killed_mid_call_story(gw, point)


@pytest.mark.postgres
@pytest.mark.parametrize("point", ["workspace.after_rename:2", "engine.after_execute:2"])
def test_it_has_one_effect_per_call_id_after_the_gateway_is_killed_mid_call_on_postgres(gw, point):
    _killed_mid_call_story(gw, point)


def _restarted_client_makes_every_call_once(gw) -> None:
    """A new gateway and a new client make all the calls: each call id recorded once, one
    effect per key in the adapter's own journal."""
    port = free_port()
    gateway = gateway_start(port)
    try:
        second = _client(port, gw.token)
    finally:
        gateway_stop(gateway)
    assert second.returncode == 0, second.stderr
    assert events(second.stdout)[-1] == {"outcome": "done", "executed": CALLS}
    calls = checkpoint_verify(run_id=gw.run_id).state.planner_state["calls"]
    keys = {derive_key(run_id=gw.run_id, cursor=c["cursor"], replan_epoch=c["epoch"]) for c in calls.values()}
    assert sorted(calls) == [f"note-{i}" for i in range(CALLS)]
    assert gw.effects() == {key: 1 for key in keys}


def _killed_mid_call_story(gw, point: str) -> None:
    port = free_port()
    doomed = gateway_start(port, RATCHET_CRASH_AT=point)
    first = _client(port, gw.token)
    doomed.wait(timeout=60)
    assert doomed.returncode == -9, doomed.stderr.read()
    assert first.returncode != 0  # the client died with its gateway
    gateway_stop(doomed)
    _restarted_client_makes_every_call_once(gw)
    for i in range(CALLS):
        assert (gw.workspace / f"notes/{i}.txt").read_text() == f"note {i}\n"
    if point.startswith(("workspace.", "engine.after_execute", "engine.before_execute")):
        # The killed call's intent was committed: the write in flight is settled by recovery
        # before the next call's intent is admitted.
        seqs = list(TraceEvent.objects.filter(run_id=gw.run_id, event_type="intent.proposed")
                    .order_by("seq").values_list("seq", flat=True))
        recovered = list(TraceEvent.objects.filter(run_id=gw.run_id, event_type="recovery.succeeded")
                         .values_list("seq", flat=True))
        assert len(seqs) == CALLS
        assert any(seqs[1] < seq < seqs[2] for seq in recovered), (seqs, recovered)


def test_a_gateway_killed_while_its_lease_is_warm_is_taken_over_once_the_lease_expires(gw):
    """Between calls the gateway keeps the run's lease warm (DESIGN.md section 5.12): a SIGKILL
    then leaves it held, the next gateway waits for it to expire by the database clock, recovers,
    answers the calls already made from the ledger and makes the new one once."""
    port = free_port()
    doomed = gateway_start(port, RATCHET_GATEWAY_IDLE_SECONDS="60", RATCHET_GATEWAY_HOLD_SECONDS="60")
    try:
        first = subprocess.run([sys.executable, str(CLIENT), "--url", f"http://127.0.0.1:{port}/mcp",
                                "--calls", "2"], cwd=ROOT, text=True, capture_output=True, timeout=120,
                               env=child_env(RATCHET_GATEWAY_TOKEN=gw.token))
        assert first.returncode == 0, first.stderr
        holder = Run.objects.filter(run_id=gw.run_id).values_list("owner_worker", flat=True).get()
        assert "/gateway-" in holder  # still warm when the kill lands
    finally:
        gateway_stop(doomed)
    _restarted_client_makes_every_call_once(gw)
    previous = TraceEvent.objects.filter(run_id=gw.run_id, event_type="lease.acquired").values_list(
        "payload__previous_owner", flat=True)
    assert any("/gateway-" in (owner or "") for owner in previous)  # a takeover of the dead one's lease


@pytest.mark.slow
def test_it_has_one_effect_per_call_id_when_both_are_killed_at_random_moments(gw):
    rng = random.Random(12)  # a fixed seed: the same moments on every run
    for _ in range(4):
        port = free_port()
        gateway = gateway_start(port)
        client = subprocess.Popen([sys.executable, str(CLIENT), "--url", f"http://127.0.0.1:{port}/mcp",
                                   "--calls", str(CALLS)], cwd=ROOT, text=True, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=child_env(RATCHET_GATEWAY_TOKEN=gw.token))
        time.sleep(rng.uniform(0.5, 3.0))
        for proc in (gateway, client):
            gateway_stop(proc)
    port = free_port()
    gateway = gateway_start(port)
    try:
        final = _client(port, gw.token)
    finally:
        gateway_stop(gateway)
    assert final.returncode == 0, final.stderr
    state = checkpoint_verify(run_id=gw.run_id).state
    calls = state.planner_state["calls"]
    keys = {derive_key(run_id=gw.run_id, cursor=c["cursor"], replan_epoch=c["epoch"]) for c in calls.values()}
    assert sorted(calls) == [f"note-{i}" for i in range(CALLS)]
    assert gw.effects() == {key: 1 for key in keys}
