"""Story: a crossed rollout threshold stops new runs, not the ones in flight (DESIGN.md section 8.3).

Each threshold is crossed by real runs (a duplicate reported by a run's effect audit, a recovery
that froze, a slow recovery against a tight limit); new runs of that tenant and task are refused
with a typed error naming the metric, its value and the threshold, a run already in flight
still completes, other tasks are not affected, and a signed admin decision re-opens admission.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from runtime.engine import run_advance, run_start
from runtime.errors import AdmissionClosedError
from runtime.evidence.trace import trace_append
from runtime.models import AdmissionDecision, Run
from runtime.rollout.admission import admission_decision_verify, admission_reopen, admission_state
from tests.engine.support import run_target, write_scripted_task
from tests.helpers.procs import run_killed_at, run_manage

pytestmark = pytest.mark.django_db(transaction=True)



def _dashboard(name: str) -> str:
    admin = get_user_model().objects.create_superuser(name, f"{name}@example.org", "correct horse battery staple")
    client = Client()
    client.force_login(admin)
    response = client.get(reverse("review:runs"))
    assert response.status_code == 200
    return response.content.decode()


def _scope(run_id: str) -> tuple[str, str]:
    run = Run.objects.get(run_id=run_id)
    return run.tenant_id, run.task_id


def test_it_stops_new_runs_at_the_first_duplicate_and_reopens_on_a_signed_decision(
        workspace_task: Path, tmp_path: Path) -> None:
    in_flight = run_start(spec_path=write_scripted_task(tmp_path / "in-flight"))  # the same task, its own workspace
    finished = run_start(spec_path=workspace_task)
    assert run_advance(run_id=finished).phase == "completed"
    # A duplicate the completing run's audit found in the adapter's records (the counted event).
    trace_append(run_id=finished, event_type="audit.effects", payload={"keys": 5, "duplicates": 1, "missing": []})

    with pytest.raises(AdmissionClosedError) as refused:
        run_start(spec_path=workspace_task)

    context = refused.value.context
    assert (context["metric"], context["value"], context["threshold"]) == ("duplicate_submissions", 1, 0)
    assert run_advance(run_id=in_flight).phase == "completed"  # in flight keeps going
    page = _dashboard("ada")
    assert "New runs are refused" in page and "duplicate_submissions is 1 (threshold 0)" in page
    tenant, task = _scope(finished)
    decision = admission_reopen(tenant_id=tenant, task_id=task, decided_by="ada", reason="duplicate checked")
    admission_decision_verify(AdmissionDecision.objects.get(pk=decision.pk))
    assert decision.body["closed_by"]["metric"] == "duplicate_submissions"
    assert "New runs are refused" not in _dashboard("bob")
    assert run_advance(run_id=run_start(spec_path=write_scripted_task(tmp_path / "after"))).phase == "completed"


def test_it_stops_new_runs_when_the_recovery_success_rate_drops(replay_task: Path, settings) -> None:
    settings.RATCHET_ADMISSION_MIN_RECOVERIES = 1
    run_id = run_killed_at(replay_task, "engine.after_step_commit")
    (run_target(run_id) / "README.md").write_text("edited while the worker was dead\n")
    assert run_advance(run_id=run_id, wait_seconds=10).phase == "needs_review"

    with pytest.raises(AdmissionClosedError) as refused:
        run_start(spec_path=replay_task)

    assert (refused.value.context["metric"], refused.value.context["value"]) == ("recovery_success_rate", 0.0)
    assert refused.value.context["threshold"] == 0.9


def test_it_stops_new_runs_when_recoveries_take_too_long(replay_task: Path, settings) -> None:
    tenant_task = None
    run_id = run_killed_at(replay_task, "engine.after_execute:2")
    assert run_advance(run_id=run_id, wait_seconds=10).phase == "completed"
    tenant_task = "/".join(_scope(run_id))
    settings.RATCHET_ADMISSION_THRESHOLDS = json.dumps({tenant_task: {"min_recoveries": 1,
                                                                      "max_p95_seconds": 0.001}})

    state = admission_state(tenant_id=_scope(run_id)[0], task_id=_scope(run_id)[1])

    assert (state.open, state.metric, state.threshold) == (False, "recovery_duration_p95_seconds", 0.001)
    with pytest.raises(AdmissionClosedError):
        run_start(spec_path=replay_task)


def test_the_admission_command_reopens_a_closed_scope(workspace_task: Path) -> None:
    run_id = run_start(spec_path=workspace_task)
    trace_append(run_id=run_id, event_type="audit.effects", payload={"keys": 1, "duplicates": 2, "missing": []})
    tenant, task = _scope(run_id)

    closed = run_manage("admission", "status", tenant, task)
    reopened = run_manage("admission", "reopen", tenant, task, "--by", "ada", "--reason", "checked one by one")
    after = run_manage("admission", "status", tenant, task)

    assert (closed.returncode, reopened.returncode, after.returncode) == (1, 0, 0), reopened.stderr
    assert "CLOSED: duplicate_submissions 2 (threshold 0)" in closed.stdout
