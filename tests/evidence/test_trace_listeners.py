"""Story: another app listens to the trace (as the notifications do). It hears every event a run
appends, by the checkpoint commit and by a single append alike, with the seq the trace stored;
and a listener that raises never fails the run that traced the event (DESIGN.md section 6.10)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runtime.engine import run_advance, run_start
from runtime.evidence.listeners import AppendedEvent, trace_listener_register, trace_listener_remove
from runtime.evidence.trace import trace_append
from runtime.models import TraceEvent
from tests.factories import write_scripted_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def heard() -> Iterator[list[AppendedEvent]]:
    events: list[AppendedEvent] = []

    def listener(event: AppendedEvent) -> None:
        events.append(event)

    def broken(event: AppendedEvent) -> None:
        raise RuntimeError("a listener's bug")

    trace_listener_register(listener=broken)
    trace_listener_register(listener=listener)
    yield events
    trace_listener_remove(listener=listener)
    trace_listener_remove(listener=broken)


def test_it_hands_every_appended_event_to_the_listeners_and_survives_a_broken_one(
        tmp_path, ratchet_keys, heard) -> None:  # type: ignore[no-untyped-def]
    spec = write_scripted_task(tmp_path, steps=[{"target": "a.txt", "content": "A\n"}])
    run_id = run_start(spec_path=spec, worker="w")
    assert run_advance(run_id=run_id, worker="w").phase == "completed", "a raising listener fails nothing"
    trace_append(run_id=run_id, event_type="note.added", payload={"by": "test"})
    stored = list(TraceEvent.objects.filter(run_id=run_id).order_by("seq").values_list("seq", "event_type"))
    mine = [(e.seq, e.event_type) for e in heard if e.run_id == run_id]
    assert mine == stored
    assert ("run.completed" in {t for _, t in mine}) and mine[-1][1] == "note.added"
