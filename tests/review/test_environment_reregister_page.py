"""Story: a reviewer re-registers a fenced-out run's environment from its page (DESIGN.md section 4.16).

The run page of a run frozen by a fencing refusal offers the reviewer a signed re-registration:
the fence they read and why the environment is sound. The statement is signed with the reviewer
role key naming the signed-in user, traced on the run, and the environment's counter moves up to
the fence; an operator (no ``review.decide_case``) is refused and nothing changes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from runtime.engine import run_advance, run_start
from runtime.models import EnvironmentRegistration, Run
from tests.engine.support import run_target, trace_events
from tests.factories import write_scripted_task

pytestmark = pytest.mark.django_db(transaction=True)

FENCE = 777_777


def _fenced_out(tmp_path: Path) -> str:
    run_id = run_start(spec_path=write_scripted_task(tmp_path, steps=[{"target": "a.txt", "content": "a\n"},
                                                                       {"target": "b.txt", "content": "b\n"}]))
    run_advance(run_id=run_id, max_steps=1)
    (run_target(run_id) / ".ratchet" / "fence").write_text(f"{FENCE}\n", encoding="ascii")
    assert run_advance(run_id=run_id).stop_reason == "adapter_refused"
    return run_id


def test_n11_a_reviewer_reregisters_the_environment_from_the_run_page(tmp_path, client_for, all_root_keys) -> None:
    run_id = _fenced_out(tmp_path)
    instance = Run.objects.get(run_id=run_id).environment_instance_id
    url = reverse("review:environment-reregister", args=[run_id])
    reviewer = client_for("reviewer")
    assert "Re-register environment (signed)" in reviewer.get(reverse("review:run", args=[run_id])).text

    refused = client_for("operator").post(url, {"observed_fence": str(FENCE), "reason": "looked"})
    assert refused.status_code == 403
    assert EnvironmentRegistration.objects.get(instance_id=instance).fencing_token < FENCE

    done = reviewer.post(url, {"observed_fence": str(FENCE), "reason": "the workspace is intact"})

    assert done.status_code == 303
    assert EnvironmentRegistration.objects.get(instance_id=instance).fencing_token == FENCE
    [event] = trace_events(run_id, "environment.reregistered")
    assert event["statement"]["reviewer"] == "reviewer" and event["statement"]["reason"] == "the workspace is intact"
