"""Acceptance: a run whose worker is SIGKILLed mid-step and which another worker recovers shows
as one trace in a real OTLP receiver, across the two worker processes (DESIGN.md section 8.6).

Both workers are real processes exporting over OTLP/HTTP to a receiver on loopback
(``tests/telemetry/otlp_receiver.py``). The first hangs inside its second write; once the
receiver holds its finished steps it is killed with SIGKILL, so its open spans are never sent.
The second takes the lease over when it expires, emits a ``ratchet.recovery`` span ending in
error that names the interrupted write, and finishes the run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.core.tracing import run_span_context
from runtime.engine import run_start
from tests.engine.support import write_scripted_task
from tests.helpers.procs import ROOT, child_env, wait_for
from tests.telemetry.otlp_receiver import ReceivedSpan, otlp_receiver

pytestmark = pytest.mark.django_db(transaction=True)

CHILD = "tests.telemetry.child_traced_worker"
WRITES = [{"target": "a.txt", "content": "one\n"}, {"target": "b.txt", "content": "two\n"},
          {"target": "c.txt", "content": "three\n"}]


def worker(run_id: str, name: str, markers: Path, endpoint: str, *extra: str) -> subprocess.Popen[str]:
    env = child_env(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                    OTEL_SERVICE_NAME=f"ratchet-{name}", OTEL_BSP_SCHEDULE_DELAY="50",
                    RATCHET_LEASE_SECONDS="2", RATCHET_WORKER_ID=name, RATCHET_LOG_FORMAT="json",
                    RATCHET_LOG_LEVEL="DEBUG")
    return subprocess.Popen([sys.executable, "-m", CHILD, run_id, name, str(markers), *extra], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def of(spans: list[ReceivedSpan], name: str, worker_name: str | None = None) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name
            and (worker_name is None or s.attributes.get("ratchet.worker") == worker_name)]


def test_a_killed_and_recovered_run_is_one_trace_across_both_workers(tmp_path: Path) -> None:
    run_id = run_start(spec_path=write_scripted_task(tmp_path / "task", WRITES))
    markers = tmp_path / "markers"
    markers.mkdir()
    root = run_span_context(run_id)
    trace_id, root_span = format(root.trace_id, "032x"), format(root.span_id, "016x")

    with otlp_receiver() as receiver:
        doomed = worker(run_id, "doomed", markers, receiver.endpoint, "hang")
        try:
            # Propose 1, execute 1, propose 2 have ended (and were exported); execute 2 hangs.
            wait_for(lambda: (markers / "hanging").exists() and len(of(receiver.snapshot(), "ratchet.step",
                                                                       "doomed")) >= 3
                     or doomed.poll() is not None, timeout=90, what="the first worker to hang in its second write")
            assert doomed.poll() is None, doomed.communicate()
            os.kill(doomed.pid, signal.SIGKILL)
        finally:
            if doomed.poll() is None:
                os.kill(doomed.pid, signal.SIGKILL)
            doomed.wait(timeout=30)
        assert doomed.returncode == -signal.SIGKILL

        rescuer = worker(run_id, "rescuer", markers, receiver.endpoint)
        out, err = rescuer.communicate(timeout=180)
        assert rescuer.returncode == 0, err
        report = json.loads(out.strip().splitlines()[-1])
        assert report["phase"] == "completed" and report["recovered"] is True
        wait_for(lambda: of(receiver.snapshot(), "ratchet.run.advance", "rescuer"), timeout=30,
                 what="the rescuer's spans")
        spans = [s for s in receiver.snapshot() if s.name.startswith("ratchet.")]

    # One trace, named by the run id, with spans from both processes.
    assert {s.trace_id for s in spans} == {trace_id}
    assert {s.resource["service.name"] for s in spans} == {"ratchet-doomed", "ratchet-rescuer"}
    assert {s.attributes["ratchet.run_id"] for s in spans} == {run_id}
    # The killed worker's steps arrived; the step it was killed in, and its advance span, never ended.
    doomed_steps = of(spans, "ratchet.step", "doomed")
    assert len(doomed_steps) == 3 and not of(spans, "ratchet.run.advance", "doomed")
    # Every span hangs off the run's root or off another span the receiver holds, except the
    # killed worker's steps, whose parent (its advance span) died with it: one tree, one gap.
    ids = {s.span_id for s in spans} | {root_span}
    orphans = [s for s in spans if s.parent_span_id not in ids]
    assert {id(s) for s in orphans} == {id(s) for s in doomed_steps}
    assert len({s.parent_span_id for s in orphans}) == 1
    in_flight = max(doomed_steps, key=lambda s: s.attributes["ratchet.generation"])
    key = in_flight.attributes["ratchet.idempotency_key.after"]

    # The recovering worker's side: a recovery span in error, linked to the run, naming that write.
    (recovery,) = of(spans, "ratchet.recovery", "rescuer")
    assert recovery.status_error and recovery.parent_span_id == root_span
    assert [(t, s) for t, s, _ in recovery.links] == [(trace_id, root_span)]
    assert recovery.attributes["ratchet.recovery.previous_owner"] == "doomed"
    assert (recovery.attributes["ratchet.phase"], recovery.attributes["ratchet.idempotency_key"]) == ("pending", key)
    assert recovery.attributes["ratchet.generation"] == in_flight.attributes["ratchet.generation.after"]
    assert "worker doomed stopped without releasing the lease" in recovery.status_message and key in \
        recovery.status_message
    (advance,) = of(spans, "ratchet.run.advance", "rescuer")
    assert advance.attributes["ratchet.phase"] == "completed" and advance.attributes["ratchet.recovered"] is True
    settled = [s for s in of(spans, "ratchet.step", "rescuer") if s.attributes.get("ratchet.idempotency_key") == key]
    assert len(settled) == 1 and not settled[0].status_error

    # The rescuer's log (RATCHET_LOG_FORMAT=json): one JSON object per line; the lines written
    # while it drove the run carry the run id, and the trace id a trace search finds.
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    (takeover,) = [line for line in lines if "took over the expired lease" in line["message"]]
    assert takeover["run_id"] == run_id and takeover["trace_id"] == trace_id
    assert takeover["logger"] == "runtime.ownership.leases" and takeover["level"] == "INFO"
