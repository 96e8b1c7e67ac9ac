"""Acceptance: a run whose Celery worker is SIGKILLed mid-step and which another Celery worker
recovers is one trace in a real OTLP receiver on loopback, across the two workers (DESIGN.md
section 8.6).

Both workers are real ``celery worker`` processes exporting over OTLP/HTTP to a receiver on
loopback (``tests/telemetry/otlp_receiver.py``). The first hangs inside its second write; once
the receiver holds its finished steps, its process group is killed with SIGKILL, so its open
spans are never sent. The second (a prefork pool with beat) re-queues the run when the lease
expires, emits a ``ratchet.recovery`` span ending in error that names the interrupted write, and
finishes the run; its task spans (Celery instrumentation) are linked from the run's spans, and
its JSON log lines carry the run id and the trace id.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.core.tracing import run_span_context
from runtime.engine import run_start
from runtime.models import Run
from tests.celery.support import Worker, worker_command
from tests.engine.support import write_scripted_task
from tests.helpers.procs import wait_for
from tests.telemetry.otlp_receiver import ReceivedSpan, otlp_receiver

pytestmark = pytest.mark.django_db(transaction=True)

WRITES = [{"target": "a.txt", "content": "one\n"}, {"target": "b.txt", "content": "two\n"},
          {"target": "c.txt", "content": "three\n"}]


def named(spans: list[ReceivedSpan], name: str, worker_prefix: str) -> list[ReceivedSpan]:
    return [s for s in spans
            if s.name == name and str(s.attributes.get("ratchet.worker", "")).startswith(worker_prefix)]


def test_a_run_killed_in_one_celery_worker_and_recovered_by_another_is_one_trace(
        tmp_path: Path, workers: Callable[..., Worker], send: Callable[..., None]) -> None:
    run_id = run_start(spec_path=write_scripted_task(tmp_path / "task", WRITES))
    root = run_span_context(run_id)
    trace_id, root_span = format(root.trace_id, "032x"), format(root.span_id, "016x")
    markers = tmp_path / "markers"
    markers.mkdir()

    with otlp_receiver() as receiver:
        otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        doomed_cmd = [sys.executable, "-m", "tests.telemetry.hanging_celery_worker",
                      *worker_command(name="doomed", pool="solo", concurrency=1, beat=False,
                                      schedule=tmp_path / "beat-doomed")[3:]]
        doomed = workers(name="doomed", command=doomed_cmd,
                         env={**otel, "OTEL_SERVICE_NAME": "ratchet-doomed", "RATCHET_TEST_HANG_DIR": str(markers)})
        send("ratchet.advance_run", run_id)
        # With one commit per write the steps before the hang are two: the first intent, then the
        # first write executed with its receipt and the second intent in one commit.
        wait_for(lambda: (markers / "hanging").exists()
                 and len(named(receiver.snapshot(), "ratchet.step", "doomed@")) >= 2
                 or doomed.proc.poll() is not None, timeout=90, what="the doomed worker to hang in its second write")
        assert doomed.proc.poll() is None, doomed.output()[-3000:]
        os.killpg(doomed.pid, signal.SIGKILL)
        assert doomed.wait_exit(timeout=30) == -signal.SIGKILL

        rescuer = workers(name="rescuer", beat=True, concurrency=1,
                          env={**otel, "OTEL_SERVICE_NAME": "ratchet-rescuer", "RATCHET_LOG_FORMAT": "json"})
        try:
            wait_for(lambda: any(s.attributes.get("ratchet.phase") == "completed"
                                 for s in named(receiver.snapshot(), "ratchet.run.advance", "rescuer@")),
                     timeout=120, what="the rescuer to finish the run")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{rescuer.output()[-4000:]}") from None
        spans = receiver.snapshot()

    assert Run.objects.get(run_id=run_id).phase == "completed"
    ours = [s for s in spans if s.name.startswith("ratchet.")]
    assert {s.trace_id for s in ours} == {trace_id}
    assert {s.resource["service.name"] for s in ours} == {"ratchet-doomed", "ratchet-rescuer"}
    # The killed worker's finished steps arrived; the step it was killed in, and its advance span,
    # never ended. Every span hangs off the run's root or off another span the receiver holds,
    # except those steps, whose parent died with the worker: one tree with one gap.
    doomed_steps = named(ours, "ratchet.step", "doomed@")
    assert len(doomed_steps) == 2 and not named(ours, "ratchet.run.advance", "doomed@")
    ids = {s.span_id for s in ours} | {root_span}
    orphans = [s for s in ours if s.parent_span_id not in ids]
    assert {s.span_id for s in orphans} == {s.span_id for s in doomed_steps}
    assert len({s.parent_span_id for s in orphans}) == 1
    in_flight = max(doomed_steps, key=lambda s: s.attributes["ratchet.generation"])
    key = in_flight.attributes["ratchet.idempotency_key.after"]

    # The recovering worker's side: a recovery span in error, linked to the run, naming that write.
    (recovery,) = named(ours, "ratchet.recovery", "rescuer@")
    assert recovery.status_error and recovery.parent_span_id == root_span
    assert [(t, s) for t, s, _ in recovery.links] == [(trace_id, root_span)]
    previous = recovery.attributes["ratchet.recovery.previous_owner"]
    assert previous.startswith("doomed@") and Run.objects.get(run_id=run_id).owner_worker != previous
    assert (recovery.attributes["ratchet.phase"], recovery.attributes["ratchet.idempotency_key"]) == ("pending", key)
    assert recovery.attributes["ratchet.generation"] == in_flight.attributes["ratchet.generation.after"]
    assert f"worker {previous} stopped without releasing the lease" in recovery.status_message
    assert key in recovery.status_message
    settled = [s for s in named(ours, "ratchet.step", "rescuer@") if s.attributes.get("ratchet.idempotency_key") == key]
    assert len(settled) == 1 and not settled[0].status_error

    # The rescuer's task spans (Celery instrumentation) are linked from its run spans.
    tasks = {s.span_id: s for s in spans if s.name == "run/ratchet.advance_run"
             and s.resource["service.name"] == "ratchet-rescuer"}
    advances = named(ours, "ratchet.run.advance", "rescuer@")
    assert advances and all(len(a.links) == 1 and a.links[0][1] in tasks for a in advances)

    # The rescuer's log (RATCHET_LOG_FORMAT=json): the lines written while it drove the run carry
    # the run id, and the trace id a trace search finds.
    lines = [json.loads(line) for line in rescuer.output().splitlines() if line.startswith("{")]
    (takeover,) = [line for line in lines if "took over the expired lease" in line["message"]]
    assert takeover["run_id"] == run_id and takeover["trace_id"] == trace_id
    assert takeover["logger"] == "runtime.ownership.leases" and takeover["level"] == "INFO"
