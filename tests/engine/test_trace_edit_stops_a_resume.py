"""Story: an edited trace stops a resume (DESIGN.md section 4.15).

The trace is the evidence a person reads to decide about a run. A resume that extended an edited
chain would bury the edit under new events, so a person's ``manage.py resume`` and every recovery
re-hash the run's trace first: an edited event fails closed with ``TraceChainError``, the run row
is frozen with the typed reason ``restore_refused`` and one review case names the error.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db.models.functions import Now

from runtime.decisions.verdicts import RunExit
from runtime.engine import run_advance, run_start
from runtime.errors import TraceChainError
from runtime.models import ReviewCase, Run, TraceEvent
from tests.factories import write_scripted_task

pytestmark = pytest.mark.django_db(transaction=True)

STEPS = [{"target": "a.txt", "content": "a\n"}, {"target": "b.txt", "content": "b\n"}]


def _edit_a_trace_event(run_id: str) -> None:
    first = TraceEvent.objects.filter(run_id=run_id).order_by("seq").first()
    TraceEvent.objects.filter(pk=first.pk).update(payload={**first.payload, "edited": "by hand"})


def test_n16_a_trace_edit_stops_a_persons_resume_and_opens_a_case(tmp_path: Path) -> None:
    run_id = run_start(spec_path=write_scripted_task(tmp_path, steps=STEPS))
    run_advance(run_id=run_id, max_steps=1)
    generation = Run.objects.get(run_id=run_id).generation
    _edit_a_trace_event(run_id)

    with pytest.raises(CommandError, match="TraceChainError|does not verify|seq 1") as caught:
        call_command("resume", run_id, "--no-progress", stdout=io.StringIO(), stderr=io.StringIO())

    assert caught.value.returncode == RunExit.ERROR
    row = Run.objects.get(run_id=run_id)
    assert (row.phase, row.stop_reason, row.generation) == ("needs_review", "restore_refused", generation)
    [case] = ReviewCase.objects.filter(run_id=run_id)
    assert case.reason == "restore_refused" and case.detail.startswith("TraceChainError")


def test_n16_a_trace_edit_stops_a_recovery(tmp_path: Path) -> None:
    run_id = run_start(spec_path=write_scripted_task(tmp_path, steps=STEPS))
    run_advance(run_id=run_id, max_steps=1)
    generation = Run.objects.get(run_id=run_id).generation
    Run.objects.filter(run_id=run_id).update(owner_worker="dead-worker", lease_expires_at=Now())
    _edit_a_trace_event(run_id)

    with pytest.raises(TraceChainError):
        run_advance(run_id=run_id, worker="worker-b")

    assert Run.objects.get(run_id=run_id).generation == generation  # nothing was committed
    assert ReviewCase.objects.filter(run_id=run_id, reason="restore_refused").count() == 1
    newest = TraceEvent.objects.filter(run_id=run_id).order_by("-seq").first()
    assert newest.event_type == "recovery.failed" and newest.payload["error"] == "TraceChainError"


def test_n16_an_untouched_trace_resumes_as_before(tmp_path: Path) -> None:
    run_id = run_start(spec_path=write_scripted_task(tmp_path, steps=STEPS))
    run_advance(run_id=run_id, max_steps=1)

    call_command("resume", run_id, "--no-progress", stdout=io.StringIO(), stderr=io.StringIO())

    assert Run.objects.get(run_id=run_id).phase == "completed"
    assert not ReviewCase.objects.filter(run_id=run_id).exists()
