"""Story: with tracing on, a run's start, its steps and a recovery are spans in one trace named by
the run id, carrying run id, generation, phase, adapter and idempotency key (DESIGN.md section 8.6).
Off, the engine makes no span at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from runtime.core import tracing
from runtime.engine import run_advance, run_start
from runtime.ownership.leases import lease_acquire
from tests.engine.support import write_scripted_task

pytestmark = pytest.mark.django_db(transaction=True)

WRITES = [{"target": "a.txt", "content": "one\n"}, {"target": "b.txt", "content": "two\n"}]


def by_name(exporter: InMemorySpanExporter, name: str) -> list:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def test_a_run_is_one_trace_named_by_its_id(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    run_id = run_start(spec_path=write_scripted_task(tmp_path / "task", WRITES))
    report = run_advance(run_id=run_id, worker="w-1")
    assert report.phase == "completed"

    root = tracing.run_span_context(run_id)
    ours = [s for s in spans.get_finished_spans() if s.name.startswith("ratchet.")]
    assert {s.name for s in ours} == {"ratchet.run.start", "ratchet.run.advance", "ratchet.step"}
    assert {s.context.trace_id for s in ours} == {root.trace_id}
    (start,) = by_name(spans, "ratchet.run.start")
    (advance,) = by_name(spans, "ratchet.run.advance")
    assert start.parent.span_id == advance.parent.span_id == root.span_id
    assert advance.attributes["ratchet.run_id"] == run_id
    assert (advance.attributes["ratchet.phase"], advance.attributes["ratchet.generation"]) == ("completed",
                                                                                             report.generation)
    steps = by_name(spans, "ratchet.step")
    assert len(steps) == report.steps
    assert all(s.parent.span_id == advance.context.span_id for s in steps)
    assert all(s.attributes["ratchet.run_id"] == run_id and s.attributes["ratchet.adapter"] == "workspace"
               for s in steps)
    # The steps walk the generations in order; each execute step names the key it settles, and
    # the step that proposed a write names it after: a proposal step, or with one commit per write
    # (DESIGN.md section 4.13) the execute step of the write before.
    generations = [s.attributes["ratchet.generation"] for s in sorted(steps, key=lambda s: s.start_time)]
    assert generations == sorted(generations) and len(set(generations)) == len(generations)
    executes = [s for s in steps if s.attributes["ratchet.phase"] == "pending"]
    proposes = [s for s in steps if s.attributes.get("ratchet.idempotency_key.after")
                not in (None, s.attributes.get("ratchet.idempotency_key"))]
    assert len(executes) == len(WRITES) == len(proposes)
    assert ({s.attributes["ratchet.idempotency_key"] for s in executes}
            == {s.attributes["ratchet.idempotency_key.after"] for s in proposes})
    assert not any(s.status.status_code == StatusCode.ERROR for s in ours)


def test_a_takeover_leaves_a_recovery_span_in_error_linked_to_the_run(
        tmp_path: Path, spans: InMemorySpanExporter) -> None:
    run_id = run_start(spec_path=write_scripted_task(tmp_path / "task", WRITES))
    assert run_advance(run_id=run_id, worker="w-1", max_steps=1).phase == "pending"
    # A worker takes the lease and vanishes without releasing it (what a SIGKILL leaves).
    lease_acquire(run_id=run_id, worker="dead-worker", ttl_seconds=0.2)
    (proposed,) = by_name(spans, "ratchet.step")
    # The rescuer waits for that lease to expire by the database clock, as a real one does.
    report = run_advance(run_id=run_id, worker="rescuer", wait_seconds=10)
    assert report.recovered and report.phase == "completed"

    (recovery,) = by_name(spans, "ratchet.recovery")
    root = tracing.run_span_context(run_id)
    assert recovery.context.trace_id == root.trace_id and recovery.parent.span_id == root.span_id
    assert [link.context.span_id for link in recovery.links] == [root.span_id]
    assert recovery.status.status_code == StatusCode.ERROR
    attrs = recovery.attributes
    assert attrs["ratchet.recovery.previous_owner"] == "dead-worker" and attrs["ratchet.worker"] == "rescuer"
    assert attrs["ratchet.phase"] == "pending" and attrs["ratchet.adapter"] == "workspace"
    key = attrs["ratchet.idempotency_key"]
    assert key and key == proposed.attributes["ratchet.idempotency_key.after"]
    assert f"worker dead-worker stopped without releasing the lease at generation {attrs['ratchet.generation']}" \
        in recovery.status.description and key in recovery.status.description
    # The step that settles the interrupted write names the same key.
    settle = [s for s in by_name(spans, "ratchet.step") if s.attributes.get("ratchet.idempotency_key") == key
              and s.attributes["ratchet.worker"] == "rescuer"]
    assert len(settle) == 1


def test_off_the_engine_makes_no_span(tmp_path: Path) -> None:
    assert not tracing.tracing_enabled()
    with tracing.run_span("ratchet.run.advance", run_id="r") as current, tracing.span("x") as inner:
        assert current is None and inner is None
    run_id = run_start(spec_path=write_scripted_task(tmp_path / "task", WRITES))
    assert run_advance(run_id=run_id).phase == "completed"


def test_the_trace_id_is_the_same_in_every_process_and_differs_per_run() -> None:
    first, again, other = (tracing.run_span_context(r) for r in ("run-1", "run-1", "run-2"))
    assert (first.trace_id, first.span_id) == (again.trace_id, again.span_id)
    assert first.trace_id != other.trace_id
    assert first.is_remote and first.trace_flags.sampled
