"""Story: a reviewer re-registers a fenced-out run's environment from its page (DESIGN.md section 4.16).

The run page of a run frozen by a fencing refusal offers the reviewer a signed re-registration:
the fence they read and why the environment is sound. The statement is signed with the reviewer
role key naming the signed-in user, traced on the run, and the environment's counter moves up to
the fence; an operator (no ``review.decide_case``) is refused and nothing changes. The reviewer
re-enters their password first (throttled like a decision's), may only re-register when their
scope covers every run on the environment, and only for the stop a raised fence causes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from review.models import LoginThrottle, ThrottleKind
from review.scope import scope_set
from runtime.engine import run_advance, run_start
from runtime.models import EnvironmentRegistration, Run
from tests.engine.support import run_target, trace_events
from tests.factories import write_scripted_task
from tests.review.conftest import PASSWORD
from tests.review.stories import messages

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

    refused = client_for("operator").post(url, {"observed_fence": str(FENCE), "reason": "looked",
                                                "password": PASSWORD})
    assert refused.status_code == 403
    assert EnvironmentRegistration.objects.get(instance_id=instance).fencing_token < FENCE

    done = reviewer.post(url, {"observed_fence": str(FENCE), "reason": "the workspace is intact",
                               "password": PASSWORD})

    assert done.status_code == 303
    assert EnvironmentRegistration.objects.get(instance_id=instance).fencing_token == FENCE
    [event] = trace_events(run_id, "environment.reregistered")
    assert event["statement"]["reviewer"] == "reviewer" and event["statement"]["reason"] == "the workspace is intact"


def _refused_with(client, run_id: str, fields: dict[str, str]) -> str:  # type: ignore[no-untyped-def]
    """Post a re-registration, follow the 303 and return the one message the run page shows."""
    response = client.post(reverse("review:environment-reregister", args=[run_id]),
                           {"observed_fence": str(FENCE), "reason": "looked", "password": PASSWORD, **fields})
    assert response.status_code == 303
    [shown] = messages(client.get(response["Location"]).content.decode())
    return shown


def _fence(run_id: str) -> int:
    instance = Run.objects.get(run_id=run_id).environment_instance_id
    return int(EnvironmentRegistration.objects.get(instance_id=instance).fencing_token)


def test_it_signs_nothing_without_the_reviewers_password(tmp_path, client_for, all_root_keys) -> None:
    run_id = _fenced_out(tmp_path)

    shown = _refused_with(client_for("reviewer"), run_id, {"password": "wrong"})

    assert "that is not your password. Nothing was signed." in shown
    assert _fence(run_id) < FENCE and not trace_events(run_id, "environment.reregistered")
    assert LoginThrottle.objects.get(kind=ThrottleKind.USER).failures == 1, "counted like a failed sign-in"


def test_it_refuses_a_run_that_did_not_stop_on_a_raised_fence(tmp_path, client_for, all_root_keys) -> None:
    run_id = _fenced_out(tmp_path)
    Run.objects.filter(run_id=run_id).update(stop_reason="receipt_conflict")

    shown = _refused_with(client_for("reviewer"), run_id, {})

    assert "did not stop on an adapter refusal" in shown and "receipt_conflict" in shown
    assert _fence(run_id) < FENCE and not trace_events(run_id, "environment.reregistered")


def test_it_refuses_when_the_environment_serves_runs_outside_the_reviewers_scope(
        tmp_path, client_for, all_root_keys, personas) -> None:
    run_id = _fenced_out(tmp_path)
    run = Run.objects.get(run_id=run_id)
    (tmp_path / "other").mkdir()
    other = run_start(spec_path=write_scripted_task(tmp_path / "other", steps=[{"target": "c.txt", "content": "c\n"}]))
    Run.objects.filter(run_id=other).update(environment_instance_id=run.environment_instance_id,
                                            tenant_id=run.tenant_id + "-other")
    scope_set(user=personas["reviewer"], tenant_ids=[run.tenant_id])

    shown = _refused_with(client_for("reviewer"), run_id, {})

    assert "runs outside your tenant scope" in shown
    assert _fence(run_id) < FENCE and not trace_events(run_id, "environment.reregistered")
